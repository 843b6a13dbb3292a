"""`{% demo_logins as logins %}`: the demo accounts the login page may show (see
`labeling.demo.seed.demo_logins_unchanged`): none where they do not exist or were changed."""

from django import template

from labeling.demo.seed import demo_logins_unchanged

register = template.Library()


@register.simple_tag
def demo_logins() -> list[tuple[str, str, str]]:
    return demo_logins_unchanged()
