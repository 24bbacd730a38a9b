"""Code versions of the model stages, importable without torch (planning computes cache keys from them).

Bump a stage's version whenever a change alters what it writes; its artifacts and everything downstream rebuild.
"""

TOKENIZER = "1"
TRAIN = "2"  # 1: InfoNCE on groups; 2: the training engine (objectives, components, GradCache, export)
EVALUATE = "2"  # 1: evaluate_tatoeba only; 2: the evaluation suite
