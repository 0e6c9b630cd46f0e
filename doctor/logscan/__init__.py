"""Reading an engine's log, whichever engine wrote it: the streaming scan and what parsers report.

``scanner`` keeps the lines that matter from a stream in bounded memory, through ``gate`` (the
openings of every engine's lines, from the records in ``doctor.engines``); ``prefixes`` turns
physical lines into records (wrappers, process prefixes, colours, glued and wrapped lines);
``printed_values`` reads a printed value (a literal, a count, a list of items); ``parsed`` holds
``LogFacts``, what every engine's parser (``doctor.engine_readers``) makes of the kept lines. The
file handling (stdin, ``.gz``, bad input) is the probe's: ``doctor.probes.logfile.read_log``.
"""
