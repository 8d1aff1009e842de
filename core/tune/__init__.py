"""Tune a script's DataLoader by measuring it: short profiled trials, a search that stops when
step time stops improving, the best settings and the line to change (issue 13).

    from stallscope.core.tune import TuneConfig, tune_job
    result = run_job(tune_job(TuneConfig(script=Path("train.py"))))
    print(table(result)); print("\\n".join(verdict(result)))
"""

from stallscope.core.tune.job import TuneConfig, tune_job, usable_cores
from stallscope.core.tune.result import TuneResult, load_result, table, verdict
from stallscope.core.tune.search import Search, ladder
from stallscope.core.tune.trial import Trial

__all__ = ["Search", "Trial", "TuneConfig", "TuneResult", "ladder", "load_result", "table",
           "tune_job", "usable_cores", "verdict"]
