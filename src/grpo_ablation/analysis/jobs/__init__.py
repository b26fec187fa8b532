"""One module per analysis job: what its command calls; it reads what its rule declares, calls
the rest of ``analysis``, and writes the files its rule declares (``layout``)."""
