"""workbench test suite (a package, so `tests.helpers` never resolves to a site-packages `tests`)."""
