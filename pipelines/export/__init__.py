"""Exports of warehouse results into other tools' formats.

Modules: ``mteb_results`` (``polysent export-results``: a run's ``eval_results`` as mteb result files, for setting the
numbers next to the public MTEB leaderboard), ``mteb_tasks`` (the mteb task metadata those files need, generated from
the installed mteb).
"""
