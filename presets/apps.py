from django.apps import AppConfig


class PresetsConfig(AppConfig):
    name = "presets"
    verbose_name = "Presets and capacity watches"

    def ready(self) -> None:
        # Rentals never import presets: a scheduled rental made from a preset asks for its nodes at its time by
        # `rentals.signals.scheduled_nodes_picking`, answered here with the cheapest nodes that fit the preset.
        from presets.matching import scheduled_nodes_receiver
        from rentals.models import Rental
        from rentals.signals import scheduled_nodes_picking

        scheduled_nodes_picking.connect(scheduled_nodes_receiver, sender=Rental, dispatch_uid="presets-scheduled")
