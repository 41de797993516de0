"""Automatic checks for the notebooks' exercises, one module per notebook (`nb01_grpo` checks the exercises of
notebooks/01_grpo.py, ...): each answer is compared with the library's own math. `answers` holds what they share:
reading a learner's answer and printing each exercise's verdict (`check_answers`)."""
