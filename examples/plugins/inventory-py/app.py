"""The inventory plugin, in Python (componentize-py): proof that the
nuon:plugin contract is language-neutral.

Config: {"items": {"NAME": COUNT, ...}}. The plugin keeps the inventory
it last applied in its state and plans the difference: items to add,
to change and to remove. Its outputs are the number of kinds of item and
the total count.

Build:
    componentize-py -d ../../../nuon-plugins/sdk/wit -w nuon-plugin \
        componentize app -o inventory.wasm
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, types


def _parse(text, what):
    try:
        return json.loads(text)
    except ValueError as e:
        raise Err(types.PluginError_InvalidConfig(f"the {what} is not JSON: {e}"))


def _items(request):
    config = _parse(request.config, "config")
    items = config.get("items")
    if not isinstance(items, dict) or not all(
        isinstance(v, int) and v >= 0 for v in items.values()
    ):
        raise Err(
            types.PluginError_InvalidConfig(
                "items must be a table of names to counts (whole numbers, 0 or more)"
            )
        )
    return items


def _state(request):
    if request.state is None:
        return {}
    return _parse(request.state, "state").get("items", {})


def _change(action, name, summary):
    return types.PlannedChange(action=action, target=f"item {name}", summary=summary)


class Plugin(exports.Plugin):
    def info(self):
        schema = {
            "type": "object",
            "required": ["items"],
            "properties": {"items": {"type": "object"}},
        }
        return types.PluginInfo(
            name="inventory",
            version="0.1.0",
            component_types=["wasm"],
            config_schema=json.dumps(schema),
        )

    def validate(self, config):
        _items(types.Request(config=config, state=None))

    def plan(self, request, mode):
        have = _state(request)
        want = _items(request) if mode == types.PlanMode.DEPLOY else {}
        changes = []
        for name in sorted(set(have) | set(want)):
            if name not in have:
                changes.append(_change(types.ChangeAction.CREATE, name, f"add {want[name]}"))
            elif name not in want:
                changes.append(_change(types.ChangeAction.DELETE, name, "remove"))
            elif have[name] != want[name]:
                changes.append(
                    _change(types.ChangeAction.UPDATE, name, f"{have[name]} -> {want[name]}")
                )
        host.log(host.Level.INFO, f"inventory: {len(changes)} change(s)")
        return types.ChangePlan(mode=mode, changes=changes, data=json.dumps({"items": want}))

    def apply(self, request, plan):
        items = _parse(plan.data, "plan data")["items"]
        host.progress(1, 1, "inventory written")
        outputs = {"kinds": len(items), "total": sum(items.values())}
        return types.Applied(state=json.dumps({"items": items}), outputs=json.dumps(outputs))

    def destroy(self, request, plan):
        host.log(host.Level.INFO, "inventory: removed")
