"""The metric lm-eval calls with one document's filtered responses, shared by every answer rule:
appended to the rule's module in the task folder, where ``is_correct`` is the rule's."""


def correct(references, predictions):
    """Fraction of one document's completions (1 greedy or k sampled) the rule accepts."""
    accepts = globals()["is_correct"]  # the rule's, defined above this in the task folder's module
    gold = str(references[0]).strip()
    texts = predictions[0]
    if isinstance(texts, str):
        texts = [texts]
    return sum(accepts(t, gold) for t in texts) / len(texts)
