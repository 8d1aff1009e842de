"""stallscope core: trace loading, analysis, runner, line profiles, LMDB. Never imports Qt."""

__version__ = "0.1.0"
