"""Reading a run's inputs: files opened safely within limits (``files``), decoded strictly
(``decode``, its byte-level proofs in ``proofs``, a refusal worded by ``refusal``), scanned
for forbidden material (``scan``), and put together as one run (``run``).
"""
