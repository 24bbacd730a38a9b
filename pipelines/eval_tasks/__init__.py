"""Evaluation tasks, pipelines side: one module per task (``<name>.py``) declaring its ``EvalTask`` — the evaluation
set it reads, its report labels, its model-card line, its mteb mapping and its experiment figures — registered with
``pipelines.eval_task_registry.register_task``. The registry imports every module here, so the pipelines part of a
task is one new file (its scorer is ``models/evaluation/tasks/<name>.py``; both are described in
``pipelines.eval_task_registry``).

A module here must not import ``pipelines.eval_sets.settings`` (which asks the registry when it is imported).
"""
