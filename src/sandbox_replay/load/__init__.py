"""Reading a run's inputs: files opened safely within limits (``files``), decoded strictly
into rows with their lines (``decode``), scanned for forbidden material (``scan``), and
put together as one run with its join indexes and derivations (``run``).
"""
