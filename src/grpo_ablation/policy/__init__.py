"""The base policy: tokenizer, local model, hub model, warm start, stand-ins, prefetch."""
