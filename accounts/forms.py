"""Forms of the user's profile."""

from django import forms
from django.core.exceptions import ValidationError

from accounts.models import SshPublicKey
from accounts.validators import validate_ssh_public_key


class SshPublicKeyForm(forms.ModelForm):
    """Save one OpenSSH public key under a name."""

    class Meta:
        model = SshPublicKey
        fields = ["name", "public_key"]
        widgets = {"public_key": forms.Textarea(attrs={"rows": 2, "placeholder": "ssh-ed25519 AAAA… you@laptop"})}
        help_texts = {"public_key": "The contents of your .pub file (never the private key)."}

    def __init__(self, *args, user, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_public_key(self) -> str:
        return validate_ssh_public_key(self.cleaned_data["public_key"])

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if SshPublicKey.objects.filter(user=self.user, name=name).exists():
            raise ValidationError("You already have a key with this name; choose another name.")
        return name

    def save(self, commit: bool = True) -> SshPublicKey:
        self.instance.user = self.user
        return super().save(commit)
