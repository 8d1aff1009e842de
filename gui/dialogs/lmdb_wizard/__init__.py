"""The LMDB wizard (one module per page; the Qt-free logic is in core/lmdb/).

    from stallscope.gui.dialogs.lmdb_wizard import open_lmdb_wizard
    open_lmdb_wizard(parent, source="")
"""

from stallscope.gui.dialogs.lmdb_wizard.wizard import LMDBWizard, main, open_lmdb_wizard

__all__ = ["LMDBWizard", "main", "open_lmdb_wizard"]
