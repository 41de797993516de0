"""F5 recipes, learning from feedback: refinements after a critique or a previous attempt, retries from a pivot."""
