"""Code versions of the model stages, importable without torch (planning computes cache keys from them).

Bump a stage's version whenever a change alters what it writes; its artifacts and everything downstream rebuild.
"""

TOKENIZER = "1"
TRAIN = "10"  # 1: InfoNCE on groups; 2: the training engine (objectives, components, GradCache, export);
#   3: prompts (the default prompt in the training forward, saved in the export) and no-pooler exports marked for ST
#   4: paper fidelity (MPCL scaling readings / K = 5 / contradiction-only hard negatives, VMSST-CONTRASTIVE weighting,
#      one VMSST decoder, semantic side per row, soft-label column target and TMS terms)
#   5: encoder.projection before a pretrained model's trailing Normalize; the teacher cache holds the drawn texts only
#   6: paper fidelity, round two (VMSST translation terms read μ_sem alone, dot-product contrastive term, no dropout
#      but for CONTRASTIVE, λ_vc by setting; EASE, mSimCSE, MPCL and soft-label readings as settings)
#   7: exports load everywhere (tokenizer model_max_length = positions, identity pooler instead of the torch-only
#      add_pooling_layer argument, world-readable files); interpolate_start (WiSE-FT with the start)
#   8: soft_label loss mse regresses the teacher's embeddings as the teacher outputs them (it L2-normalised them
#      before, which moved the output of a student without a trailing Normalize); start_distill
#   9: the training step at the hardware's speed: the packed (unpadded) training forward, whose dropout masks are
#      drawn for the real tokens only; fused AdamW on the CPU; the word-embedding table by rows (same maths)
#  10: an objective's own trained parameters exported beside the model (EASE's entity head, trained and initial, in
#      entity_head/, for the entity term's retrieval witness); the stats record the head's movement
EVALUATE = "3"  # 1: evaluate_tatoeba only; 2: the evaluation suite; 3: the pair_classification task
