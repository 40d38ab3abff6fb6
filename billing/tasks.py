"""Beat tasks for money: thin, one service call each."""

from __future__ import annotations

from celery import shared_task

from billing import operator_alerts, operator_notices, runway, services, statement


@shared_task(acks_late=True, reject_on_worker_lost=True)
def budgets_scan() -> int:
    """Raise budget thresholds once each and enforce where it is on."""
    return services.budgets_scan()


@shared_task(acks_late=True, reject_on_worker_lost=True)
def runway_check() -> int:
    """Read every active credential's Lium balance, then send the runway alerts that have not gone yet."""
    read = runway.balances_read_all()
    operator_alerts.alerts_send()
    operator_notices.notices_send()  # e.g. a refused pod listing, raised by the pod poller
    return read


@shared_task(acks_late=True, reject_on_worker_lost=True)
def statement_check() -> int:
    """Compare Lium's statement of the previous UTC days with our cost; return the disagreeing pod-days."""
    results = statement.statements_compare_all()
    operator_notices.notices_send()
    return sum(result.disagreeing for result in results)
