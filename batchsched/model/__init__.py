"""The session's input and output: a snapshot in (snapshot.py), decisions out
(decisions.py), and the numpy array types both are made of (arrays.py)."""
