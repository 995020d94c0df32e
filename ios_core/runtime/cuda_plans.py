"""The cuDNN plan chosen for each convolution geometry, on one device, reused across processes.

Choosing a convolution's plan means building every execution plan cuDNN offers and timing each
(``cuda_kernels.build_conv``): on an H200 that was 23-31 s of an inception_v3 search, paid again
by every process. :class:`ConvPlanBook` asks the profile database's plan cache first
(``ios_core.cost.cache.CudnnPlanCache``, keyed by the GPU, driver, cuDNN and cuDNN Frontend
versions): a geometry seen before, by any process, builds the stored plan only and times none.
A stored plan that no longer builds, or a database that cannot be read or written, is a reason
in :meth:`ConvPlanBook.stats` (the plans are then built and timed as before), never a traceback.
The device (``cuda_device.CupyDevice``, or the tests' fake) supplies the two ways to get a plan.
"""

from __future__ import annotations

from collections.abc import Callable


def _why(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
    return f"{type(e).__name__}" + (f": {text}" if text else "")


class ConvPlanBook:
    """Per device: ``choose(geometry, tune, known)`` returns a convolution built with the plan
    stored for ``geometry`` (``known(record)``: that plan built alone, none timed) or, where there
    is none, the one ``tune()`` chose (``tune() -> (conv, record, plans_built)``: every plan built
    and timed), and stores that record for every later process."""

    def __init__(self, store=None):
        self.store = store
        self.geometries = 0  # convolution geometries this device built (each once)
        self.reused = 0  # ... whose plan came from the database (no plan timed)
        self.tuned = 0  # ... whose plans were built and timed here
        self.plans_tuned = 0  # plans built to be timed (0 when every geometry was seen before)
        self.reasons: list[str] = []

    def attach(self, store) -> None:
        self.store = store

    def open(self, plan_cache, versions: dict) -> None:
        """Keep the plans in ``plan_cache``: an open store, ``"default"`` (the profile database's
        default file) or a database path, opened for ``versions`` (:func:`open_plan_cache`); one
        that cannot be opened is a reason in :meth:`stats`, and plans are built and timed here."""
        if hasattr(plan_cache, "get"):  # an open CudnnPlanCache
            self.attach(plan_cache)
            return
        store, why = open_plan_cache(versions, None if plan_cache == "default" else plan_cache)
        self.attach(store)
        if why:
            self.reasons.append(why)

    def _note(self, why: str) -> None:
        if len(self.reasons) < 5 and why not in self.reasons:
            self.reasons.append(why)

    def choose(self, geometry: str, tune: Callable[[], tuple[object, dict | None, int]],
               known: Callable[[dict], object]):
        self.geometries += 1
        record = None
        if self.store is not None:
            try:
                record = self.store.get(geometry)
            except Exception as e:  # a database that cannot be read: tune, as without one
                self._note(f"cuDNN plan cache not read ({_why(e)}): plans built and timed")
        if record is not None:
            try:
                conv = known(record)
                self.reused += 1
                return conv
            except Exception as e:
                self._note(f"stored cuDNN plan {record.get('plan_name') or record.get('plan')} not usable "
                           f"({_why(e)}): plans built and timed again")
        conv, record, built = tune()
        self.tuned += 1
        self.plans_tuned += int(built)
        if self.store is not None and record is not None:
            try:
                self.store.put(geometry, record)
            except Exception as e:
                self._note(f"cuDNN plan cache not written ({_why(e)})")
        return conv

    def stats(self) -> dict:
        reasons = list(self.reasons) + list(getattr(self.store, "reasons", []) or [])
        return {"conv_geometries": self.geometries, "plans_reused": self.reused, "plans_tuned_geometries": self.tuned,
                "plans_built_for_tuning": self.plans_tuned,
                "plan_cache": str(getattr(self.store, "path", "")) or None,
                **({"plan_cache_reasons": reasons[:5]} if reasons else {})}


def open_plan_cache(versions: dict, path=None):
    """``ios_core.cost.cache.cudnn_plan_cache(versions, path)``, or (None, reason) when it cannot
    be opened: ``(store, None)`` otherwise."""
    try:
        from ios_core.cost.cache import cudnn_plan_cache

        return cudnn_plan_cache(versions, path), None
    except Exception as e:
        return None, f"cuDNN plan cache not opened ({_why(e)}): plans built and timed in this process"


__all__ = ["ConvPlanBook", "open_plan_cache"]
