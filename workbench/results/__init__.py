"""The results the book shows: the stored runs (`stored_runs`: comparisons trained over seeds, kept under
data/stored_runs/) and the claims judged against them (`claims`: each method's claim, what the runs show, a
verdict)."""
