"""The rules reload when their files change, as a kubelet changes a ConfigMap volume (a symlink swap)."""
from __future__ import annotations

import asyncio
import os

from alertd.app.rule_watch import signature, watch_rules


def configmap_volume(root, version: str, files: dict[str, str]) -> None:
    """What the kubelet does: files in a timestamped directory, ``..data`` -> it, each name -> ..data/name."""
    target = root / f"..{version}"
    target.mkdir()
    for name, text in files.items():
        (target / name).write_text(text)
    tmp = root / "..data_tmp"
    tmp.symlink_to(target.name)
    os.replace(tmp, root / "..data")
    for name in files:
        if not (root / name).is_symlink():
            (root / name).symlink_to(f"..data/{name}")


def test_a_symlink_swap_changes_the_signature_and_reloads(tmp_path):
    vol = tmp_path / "rules.d"
    vol.mkdir()
    configmap_volume(vol, "v1", {"site.yml": "xids: []\n"})
    reloads: list[int] = []
    looks = iter([
        lambda: None,  # nothing changed: no reload
        lambda: configmap_volume(vol, "v2", {"site.yml": "xids: []\n# edited\n"}),
        lambda: (vol / "extra.yml").write_text("signals: []\n"),
    ])

    async def sleep(_: float) -> None:
        step = next(looks, None)
        if step is None:
            raise asyncio.CancelledError
        step()

    async def run() -> None:
        try:
            await watch_rules(lambda: [str(vol)], lambda: reloads.append(1), sleep=sleep)
        except asyncio.CancelledError:
            pass

    before = signature([str(vol)])
    asyncio.run(run())
    assert len(reloads) == 2
    assert signature([str(vol)]) != before and len(signature([str(vol)])) == 2
