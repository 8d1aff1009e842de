"""stallscope GUI: PySide6 + pyqtgraph views over stallscope.core."""
