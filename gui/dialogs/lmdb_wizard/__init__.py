"""The LMDB wizard (one module per page; the Qt-free logic is in core/lmdb/, its jobs in
gui/controllers/lmdb.py, which makes and opens it).

    from stallscope.gui.controllers.lmdb import open_lmdb_wizard
    open_lmdb_wizard(parent, source="")
"""

from stallscope.gui.dialogs.lmdb_wizard.wizard import LMDBWizard

__all__ = ["LMDBWizard"]
