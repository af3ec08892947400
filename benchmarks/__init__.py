"""On-demand measurements of the load generator itself (``python -m benchmarks.efficiency``, ``benchmarks.memory``).

Never part of the test suite. Nothing is imported here: ``benchmarks.bare_aio`` must run without Locust or gevent.
"""
