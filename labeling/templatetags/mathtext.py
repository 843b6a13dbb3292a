from django import template

from labeling import mathtext

register = template.Library()
register.filter("math", mathtext.render_math)
register.filter("math_excerpt", mathtext.render_excerpt)
register.filter("answer", mathtext.render_answer)
register.filter("step", mathtext.render_step)
register.filter("markdown", mathtext.render_markdown)
