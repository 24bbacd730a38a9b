"""The exit codes of every ``polysent`` command — one table, printed under each command's ``--help`` and in the
README ("The command line").

* ``OK`` (0): the command did what it was asked.
* ``FAILED`` (1): the command started and failed at run time — a node of a run, an export or a mining run that could
  not write its output, a scheduled server that stopped. Its log says which step failed.
* ``USAGE`` (2): bad input or usage, refused before anything ran or was written — an invalid configuration or option,
  a missing or unreadable input file, a model id that does not resolve, an unknown run, a SQL statement that is
  refused or does not parse.
"""

from __future__ import annotations

OK = 0
FAILED = 1
USAGE = 2

TABLE = ("exit codes:\n"
         "  0  success\n"
         "  1  the command started and failed (a node of the run, writing an export or a mining output)\n"
         "  2  bad input or usage, refused before anything ran or was written (an invalid configuration or option,\n"
         "     a missing or unreadable input, a model that does not resolve, an unknown run, a refused SQL query)")
