"""Evaluation maths (numpy) and evaluation stages: ``suite`` (stage ``evaluate``), one module per evaluation task in
``tasks/`` (its settings and scorer, found by ``task_registry``), ``settings`` (the ``evaluation`` section)."""
