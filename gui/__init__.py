"""stallscope GUI: PySide6 + pyqtgraph views over stallscope.core."""

from stallscope.gui import pyside_workaround as _pyside_workaround

_pyside_workaround.apply()  # PySide6 6.12.0 + Python 3.11 crash after ~600 signal emits
