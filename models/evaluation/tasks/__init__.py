"""Evaluation tasks, models side: one module per task (``<name>.py``) holding its settings (the ``evaluation.<name>``
section) and its scorer (a ``models.evaluation.task_registry.Task`` registered with ``@evaluation_task``). The task
registry imports every module here, so the models part of a task is one new file (its pipelines part is
``pipelines/eval_tasks/<name>.py``; both are described in ``models.evaluation.task_registry``).

This package imports nothing at import time; the modules import the protocol maths and torch inside ``score``, so the
pipeline's config loader reads their settings without loading torch.
"""
