"""Placing a cluster order: service.py is the one order service (form and API); order.py builds and prices the
order; scheduled.py sends a scheduled start at its time; validators.py checks what a customer types (pod name).
"""
