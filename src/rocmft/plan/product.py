"""Which product of an arch a plan is for (an MI300A is not an MI300X): `plan.product` in the recipe (an arch's
product, or a calibration product of docker/arches.yaml: another vendor's card a benchmark ran on), else the
product of this host's GPUs of that arch (PCI device id and CU count from the KFD topology), else the arch's
first product. The figures per product live in docker/arches.yaml (`product_figures`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..hardware import arches, host
from ..io.problems import Problem, did_you_mean


def choose(plan: Mapping[str, Any], arch: arches.Arch, gpus, file: str,
           problems: list[Problem]) -> tuple[arches.Arch, str]:
    """The arch with the figures of the product the run is for, and where that choice came from."""
    first = f"the first {arch.name} product in docker/arches.yaml"
    asked = plan.get("product")
    if asked is not None:
        if str(asked) in arch.products:
            return arch.for_product(str(asked)), "plan.product"
        calibration = arches.calibration_products()
        if str(asked) in calibration:  # another vendor's card, to compare a measurement with (gpu_truth)
            return arch.for_calibration(calibration[str(asked)]), "plan.product (a calibration product)"
        known = (*arch.products, *calibration)
        problems.append(Problem(file, "plan.product", f"`{asked}` is not a {arch.name} product",
                                did_you_mean(str(asked), known) or f"{arch.name} products: {', '.join(arch.products)}; "
                                f"calibration products: {', '.join(calibration)}"))
        return arch, first
    if not arch.product_table:
        return arch, first
    mine = [g for g in (host.gpus_from_sysfs() if gpus is None else gpus) if g.gfx == arch.name]
    if not mine:
        return arch, first
    chosen, source = _host_product(arch, mine, file, problems)
    if arch.integrated and mine[0].memory_share:
        # an integrated GPU's memory is the share this host gives it (firmware carve-out or the kernel's GTT limit)
        share = mine[0].memory_share / 2**30
        chosen = replace(chosen, gpu_memory_gb=round(share, 1))
        source += f"; its memory share {share:.1f} GiB as this host reports it (carve-out or GTT: `make doctor`)"
    return chosen, source


def _host_product(arch: arches.Arch, mine: list, file: str, problems: list[Problem]) -> tuple[arches.Arch, str]:
    first = f"the first {arch.name} product in docker/arches.yaml"
    names = [arch.identify(g.device_id, g.compute_units, g.name) for g in mine]
    known = [n for n in names if n]
    if not known:
        ids = sorted({f"0x{g.device_id:04x}" for g in mine if g.device_id})
        problems.append(Problem(file, "plan.product", f"this host's {arch.name} GPUs ({', '.join(ids) or 'no device id'}) "
                                f"are not a product docker/arches.yaml knows: planned with {arch.product}'s figures",
                                f"set plan: {{product: ...}} ({', '.join(arch.products)}) or plan.gpu_memory_gb",
                                severity="warning"))
        return arch, first
    product = known[0]
    if len(set(known)) > 1:
        problems.append(Problem(file, "plan.product", f"this host mixes {' and '.join(sorted(set(known)))}: planned for "
                                f"{product} (GPU {mine[names.index(product)].index})", "set plan: {product: ...} to choose",
                                severity="warning"))
    chosen = arch.for_product(product)
    spec = arch.product_table.get(product)
    partitioned = [g for g in mine if spec and spec.compute_units and g.compute_units
                   and g.compute_units < spec.compute_units]
    if partitioned:
        g = partitioned[0]
        problems.append(Problem(file, "plan.product", f"GPU {g.index} has {g.compute_units} of the {product}'s "
                                f"{spec.compute_units} CUs (a compute partition): planned with the whole GPU's figures",
                                "set plan.gpu_memory_gb and plan.mfu for one partition", severity="warning"))
    return chosen, f"detected on this host: {len(mine)} x {product} (/sys/class/kfd)"
