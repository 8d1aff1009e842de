"""gui/controllers: the WindowPort is what the controllers use of the main window, all of it,
and the main window has every part of it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from stallscope.gui import controllers
from stallscope.gui.controllers import WindowPort

PORT_USERS = ("fix_loop.py", "ranks_tabs.py", "export.py", "run_tabs.py", "heatmap_tabs.py",
              "compare_tab.py")
QT_OBJECT = {"deleteLater", "parent", "objectName"}  # QObject API every window has


def port_names() -> set[str]:
    methods = {n for n, v in vars(WindowPort).items()
               if inspect.isfunction(v) or isinstance(v, property)}
    return set(WindowPort.__annotations__) | {n for n in methods if not n.startswith("_")}


def test_the_port_holds_state_and_services_not_widgets(qtbot):
    """Controllers reach the window's state through its model and ask for services (pages,
    status, messages): none of the port's attributes is one of the window's widgets."""
    from PySide6.QtWidgets import QStatusBar, QWidget

    from stallscope.gui.main_window import MainWindow

    window = MainWindow(persist=False)
    qtbot.addWidget(window)
    widgets = {n for n, v in vars(window).items() if isinstance(v, QWidget | QStatusBar)}
    assert {"analysis", "compare", "tabs", "stack", "status_bar"} <= widgets  # what it holds
    assert "model" in WindowPort.__annotations__ and not port_names() & widgets


def window_uses(path: Path) -> set[str]:
    """The attributes a module reads of `window` / `self.window`."""
    used = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        if (isinstance(base, ast.Name) and base.id == "window") or (
                isinstance(base, ast.Attribute) and base.attr == "window"
                and isinstance(base.value, ast.Name) and base.value.id == "self"):
            used.add(node.attr)
    return used


def test_controllers_use_only_the_window_port():
    folder = Path(controllers.__file__).parent
    for name in PORT_USERS:
        used = window_uses(folder / name)
        assert used and used <= port_names() | QT_OBJECT, (name, used - port_names())


def test_the_main_window_has_every_part_of_the_port(qtbot):
    from stallscope.gui.main_window import MainWindow

    window = MainWindow(persist=False)
    qtbot.addWidget(window)
    missing = [n for n in port_names() if not hasattr(window, n)]
    assert missing == []
    assert window.as_widget() is window
