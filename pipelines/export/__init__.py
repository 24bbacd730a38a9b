"""Exports of warehouse results into other tools' formats.

Modules: ``mteb_results`` (``polysent export-results``: a run's ``eval_results`` as mteb result files, for setting the
numbers next to the public MTEB leaderboard), ``mteb_tasks`` (the mteb task metadata those files need: the package data
``mteb_tasks.json``, generated from the installed mteb by ``tools/mteb_tasks.py``).
"""
