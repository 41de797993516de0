"""workbench: every policy-optimization method for language models, exact, tested and shown."""
__version__ = "0.1.0"
