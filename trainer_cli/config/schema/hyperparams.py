"""Types of the constructor arguments a config passes through ``params``.

Names come from the library (see ``names``); these tables add what a value must look like for
the arguments users set most, so that ``learning_rate: fast`` fails at load time with the line
it is on rather than deep inside the first training step.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal, Optional

import annotated_types as at
from pydantic import ConfigDict, TypeAdapter, ValidationError

from ..describe import describe
from ..suggest import show

Positive = Annotated[float, at.Gt(0)]
NonNegative = Annotated[float, at.Ge(0)]
Fraction = Annotated[float, at.Ge(0), at.Le(1)]
Decay = Annotated[float, at.Ge(0), at.Lt(1)]  # momenta and betas: 1 would never forget
Count = Annotated[int, at.Ge(0)]
PositiveInt = Annotated[int, at.Ge(1)]

OPTIMIZER = {
    "learning_rate": Positive, "wd": NonNegative, "rescale_grad": Positive,
    "clip_gradient": Optional[Positive], "momentum": Decay, "beta1": Decay, "beta2": Decay,
    "epsilon": NonNegative, "eps": NonNegative, "lazy_update": bool, "multi_precision": bool,
    "centered": bool, "begin_num_update": Count, "gamma1": Fraction, "gamma2": Fraction,
    "rho": Fraction, "clip_weights": Optional[Positive], "lamda": NonNegative,
    "lamda1": NonNegative, "beta": NonNegative, "wd_lh": NonNegative,
    "schedule_decay": NonNegative, "eta": NonNegative, "bias_correction": bool,
    "momentum_correction": bool, "lower_bound": Optional[NonNegative],
    "upper_bound": Optional[NonNegative], "warmup_epochs": Count, "batch_scale": PositiveInt,
    "updates_per_epoch": PositiveInt, "begin_epoch": Count, "num_epochs": PositiveInt,
    "warmup_strategy": Literal["linear", "power2", "sqrt", "lars"],
}
# Arguments the run supplies itself; a config setting them would be ignored or conflict.
OPTIMIZER_RESERVED = {
    "lr_scheduler": "set the schedule in the lr_scheduler section",
    "param_idx2name": "the Trainer sets this",
    "param_dict": "the Trainer sets this",
    "sym": "not used by Gluon training",
}

SCHEDULER = {
    "step": PositiveInt, "factor": Annotated[float, at.Gt(0), at.Le(1)],
    "stop_factor_lr": NonNegative, "base_lr": Positive, "warmup_steps": Count,
    "warmup_begin_lr": NonNegative, "warmup_mode": Literal["linear", "constant"],
    "max_update": PositiveInt, "pwr": Positive, "final_lr": NonNegative,
}
MULTIFACTOR_STEP = Annotated[list[PositiveInt], at.MinLen(1)]

LOSS = {
    "weight": Optional[float], "batch_axis": int, "axis": int, "sparse_label": bool,
    "from_logits": bool, "from_sigmoid": bool, "rho": Positive, "margin": float,
    "label_format": Literal["signed", "binary"], "layout": Literal["NTC", "TNC"],
    "label_layout": Literal["NT", "TN"], "compute_full": bool, "smoothing_parameter": float,
}
METRIC = {"top_k": PositiveInt, "axis": int}
INITIALIZER = {
    "scale": Positive, "sigma": Positive, "magnitude": Positive,
    "rnd_type": Literal["uniform", "gaussian"], "factor_type": Literal["avg", "in", "out"],
    "rand_type": Literal["uniform", "normal"], "slope": float,
}


@lru_cache(maxsize=None)
def _adapter(annotation) -> TypeAdapter:
    return TypeAdapter(annotation, config=ConfigDict(strict=True, allow_inf_nan=False))


def check_value(annotation, value) -> tuple | None:
    """None when ``value`` fits ``annotation``, else ``(location inside value, message)``."""
    try:
        _adapter(annotation).validate_python(value)
    except ValidationError as exc:
        from ..walk import walk  # the walker follows list items down to the offending one

        first = exc.errors(include_url=False)[0]
        target = walk(annotation, first["loc"])
        if target.annotation is None or not first["loc"]:
            return (), f"expected {describe(annotation)}, got {show(value)}"
        return tuple(target.path), (f"expected {describe(target.annotation, target.metadata)}, "
                                    f"got {show(first['input'])}")
    return None
