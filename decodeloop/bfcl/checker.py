"""BFCL's own AST checker, loaded from the wheel without the package's dependencies.

`bfcl_eval/eval_checker/ast_eval/ast_checker.py` imports, at its top:

    bfcl_eval.constants.enums           Language (the standard library's enum only)
    bfcl_eval.constants.type_mappings   plain dicts
    bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter   (re, typing, type_mappings)
    bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter     (re, type_mappings)
    bfcl_eval.constants.model_config    MODEL_CONFIG_MAPPING: this one imports every model
                                        handler (and so openai, anthropic, ...)

`load_checker` imports exactly these modules from the wheel's own source,
read from the zip, through an importlib finder (`_WheelFinder`) that serves
only the names in `FROM_WHEEL` and stands in for `model_config` with a small
module of its own: `MODEL_CONFIG_MAPPING` maps any model name to a config
whose `underscore_to_dot` is False, the only field the checker reads (in
`convert_func_name`: False keeps dotted names as the model wrote them).
The packages on the way (`bfcl_eval`, `bfcl_eval.constants`, ...) are empty
modules (their `__init__.py` files in the wheel are empty too). The finder is
on `sys.meta_path` only while the checker is imported; the modules stay in
`sys.modules` under their own names, as the checker's imports expect.

`check(entry, output)` runs the checker the way BFCL's eval runner does for the
AST categories: `ast_checker(entry functions, output, possible answer,
Language.PYTHON, category, model name)`, where the output is the model's
calls decoded to `[{function name: {argument: value}}, ...]`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import threading
import types

from decodeloop.bfcl.entries import Entry
from decodeloop.bfcl.wheel import BfclError, Wheel

CHECKER = "bfcl_eval.eval_checker.ast_eval.ast_checker"
PACKAGES = (
    "bfcl_eval",
    "bfcl_eval.constants",
    "bfcl_eval.eval_checker",
    "bfcl_eval.eval_checker.ast_eval",
    "bfcl_eval.eval_checker.ast_eval.type_convertor",
)
FROM_WHEEL = (
    "bfcl_eval.constants.enums",
    "bfcl_eval.constants.type_mappings",
    "bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter",
    "bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter",
    CHECKER,
)
STAND_IN = "bfcl_eval.constants.model_config"
MODEL_NAME = "decodeloop"  # the checker only uses it to look up MODEL_CONFIG_MAPPING

_lock = threading.Lock()


class _ModelConfig:
    underscore_to_dot = False  # dotted names stay as the model wrote them


class _AnyModel(dict):
    def __missing__(self, key):
        return _ModelConfig()


class _WheelFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the checker's modules from the wheel's zip, empty packages, and the model_config stand-in."""

    def __init__(self, wheel: Wheel) -> None:
        self.wheel = wheel

    def find_spec(self, name, path=None, target=None):
        if name in PACKAGES:
            return importlib.util.spec_from_loader(name, self, is_package=True)
        if name in FROM_WHEEL or name == STAND_IN:
            return importlib.util.spec_from_loader(name, self, origin=self._member(name))
        if name.startswith("bfcl_eval."):
            raise ImportError(f"{name} is not among the modules decodeloop loads from the BFCL wheel")
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        name = module.__name__
        if name in PACKAGES:
            module.__path__ = []
        elif name == STAND_IN:
            module.MODEL_CONFIG_MAPPING = _AnyModel()
        else:
            member = self._member(name)
            code = compile(self.wheel.read_text(member), f"{self.wheel.path}/{member}", "exec")
            exec(code, module.__dict__)

    @staticmethod
    def _member(name: str) -> str:
        return name.replace(".", "/") + ".py"


def load_checker(wheel: Wheel) -> types.ModuleType:
    """BFCL's ast_checker module, imported from the wheel (once per process)."""
    with _lock:
        loaded = sys.modules.get(CHECKER)
        if loaded is not None:
            return loaded
        finder = _WheelFinder(wheel)
        sys.meta_path.insert(0, finder)
        try:
            return importlib.import_module(CHECKER)
        except (ImportError, SyntaxError, BfclError) as e:
            for name in (*FROM_WHEEL, STAND_IN, *PACKAGES):  # a half-loaded checker is not kept
                sys.modules.pop(name, None)
            raise BfclError(f"cannot load BFCL's checker from {wheel.path}: {e}") from None
        finally:
            sys.meta_path.remove(finder)


def reference_output(entry: Entry) -> list[dict]:
    """An output the possible answer accepts: each argument's first accepted value that is not the
    "may be left out" marker (arguments whose only choice is leaving them out are left out, and so are
    the few a possible answer names that the function does not declare)."""
    declared = {f["name"]: set(f["parameters"].get("properties") or {}) for f in entry.functions}
    return [{name: _chosen(arguments, declared.get(name))} for call in entry.answer for name, arguments in call.items()]


def _chosen(arguments: dict, declared: set | None = None) -> dict:
    out = {}
    for key, choices in arguments.items():
        given = [c for c in choices if c != ""]
        if given and (declared is None or key in declared):
            out[key] = _value(given[0])
    return out


def _value(value):
    # nested dicts in a possible answer hold lists of accepted values too
    if isinstance(value, dict):
        return _chosen(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_chosen(v) for v in value]
    return value


def check(checker: types.ModuleType, entry: Entry, output: list[dict]) -> dict:
    """BFCL's verdict on an entry's decoded output: {"valid": bool, "error": [...], "error_type": ...}.

    Irrelevance has no possible answer: there an entry is right when the output has no call.
    """
    if entry.category == "irrelevance":
        if output:
            return {
                "valid": False,
                "error": ["a call where none should be made"],
                "error_type": "irrelevance_error:decoder_success",
            }
        return {"valid": True, "error": []}
    language = sys.modules["bfcl_eval.constants.enums"].Language.PYTHON
    try:
        return checker.ast_checker(entry.functions, output, entry.answer, language, entry.category, MODEL_NAME)
    except Exception as e:  # the checker assumes well-shaped output; anything it trips on is a wrong answer
        return {
            "valid": False,
            "error": [f"the checker failed on this output: {type(e).__name__}: {e}"],
            "error_type": "checker_error",
        }
