"""Text the harness did not write, made safe to show and to put in a context: invisible characters found and
removed (invisible.py), untrusted text admitted with a cap and a reason (untrusted.py), and credentials never
echoed (credentials.py). Standard library only; every other layer may use it."""
