// Small Jinja templates with the output jinja2 3.1 gives under Hugging Face's settings, shared
// by tokenizer_chat_template_test.cpp (hinge must give `want`) and
// tokenizer_chat_template_oracle_test.cpp (jinja2 must give `want` too).
#pragma once

namespace hinge::testing {

// Small templates with the output jinja2 3.1 gives (trim_blocks + lstrip_blocks); each is also
// checked against the oracle below when python3-jinja2 is installed.
struct ChatTemplateCase {
  const char* tmpl;
  const char* ctx;  // JSON
  const char* want;
};
inline const ChatTemplateCase kChatTemplateCases[] = {
    {"a  {{- ' b ' -}}  c", "{}", "a b c"},
    {"{% if true %}\n  x\n{% endif %}\ny", "{}", "  x\ny"},
    {"  {% if true %}x{% endif %}  \n", "{}", "x  "},
    {"line\n    {%- if true %}\nA{% endif %}", "{}", "lineA"},
    {"  {%+ if true %}x{% endif %}", "{}", "  x"},
    {"{% if true +%}\nx{% endif %}", "{}", "\nx"},
    {"{# c #}\n  {# d #}\nx\n", "{}", "x"},
    {"{{ 'x' }}\n{{ 'y' }}\n", "{}", "x\ny"},
    {"{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
     R"({"xs": ["a", "b", "c"]})", "1a,2b,3c"},
    {"{% for x in xs if x > 1 %}{{ loop.index0 }}/{{ loop.length }}/{{ loop.revindex }} "
     "{% else %}none{% endfor %}",
     R"({"xs": [1, 2, 3]})", "0/2/2 1/2/1 "},
    {"{% for x in [] %}x{% else %}empty{% endfor %}", "{}", "empty"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|items %}{{ k }}"
     "{% endfor %}",
     R"({"d": {"z": 1, "a": [1, "x"]}})", "z=1;a=[1, 'x'];za"},
    {"{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x is odd %}{% continue "
     "%}{% endif %}{{ x }}{% endfor %}",
     "{}", "02"},
    {"{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set y = 1 "
     "%}{% endfor %}{{ ns.n }}{{ y is defined }}",
     "{}", "6False"},
    {"{% macro m(a, b='B', c=none) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 2, "
     "c=3) }}",
     "{}", "[1BNone][123]"},
    {"{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
     "{}", "321"},
    {"{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}", "{}",
     "<in>"},
    {"{% set x %}  block {{ 1 + 1 }} {% endset %}[{{ x }}]{% filter upper %}up{% endfilter %}",
     "{}", "[  block 2 ]UP"},
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2.5 }} {{ 'ab' "
     "* 2 }} {{ 1 ~ 'x' ~ none }} {{ 4 / 2 }}",
     "{}", "3 -4 2 3.5 1024 3.5 abab 1xNone 2.0"},
    {"{{ 'a' if x else 'b' }}{{ 'c' if not x }}{{ x is none }}{{ y is not defined }}", "{}",
     "bcFalseTrue"},
    {"{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}, (1,)] }}{{ {'a': \"it's\"} }}", "{}",
     "[1, 'a', None, True, 1.5, [2], {'k': 'v'}, (1,)]{'a': \"it's\"}"},
    {"{{ s[1:] }}|{{ s[::-1] }}|{{ s[-2:] }}|{{ xs[1:3] }}|{{ s[0] }}", R"({"s": "héllo",
     "xs": [1, 2, 3, 4]})", "éllo|olléh|lo|[2, 3]|h"},
    {"{{ x|tojson }}|{{ x|tojson(indent=2) }}", R"({"x": {"b": [1, 2.0, "é\"\n"], "a": {},
     "c": null, "d": true}})",
     "{\"b\": [1, 2.0, \"é\\\"\\n\"], \"a\": {}, \"c\": null, \"d\": true}|{\n  \"b\": [\n    "
     "1,\n    2.0,\n    \"é\\\"\\n\"\n  ],\n  \"a\": {},\n  \"c\": null,\n  \"d\": true\n}"},
    {"{{ '  x  '|trim }}|{{ 'Ab'|lower }}{{ 'ab'|upper }}|{{ 'hello world'|title }}|{{ "
     "'hELLO'|capitalize }}|{{ [1,2]|length }}{{ 'añb'|length }}|{{ ['a','b']|join(', ') }}|{{ "
     "'a-b'|replace('-', '+') }}|{{ none|default('d') }}{{ u|default('u') }}{{ ''|default('e', "
     "true) }}",
     "{}", "x|abAB|Hello World|Hello|23|a, b|a+b|Noneue"},
    {"{{ xs|map(attribute='n')|list }}{{ xs|selectattr('n', 'equalto', 2)|list|length }}{{ "
     "xs|rejectattr('n', 'odd')|map(attribute='n')|join }}{{ [3,1,3]|unique|list }}{{ "
     "[1,2,3]|select('odd')|list }}{{ xs|first }}{{ [1,2]|last }}",
     R"({"xs": [{"n": 1}, {"n": 2}, {"n": 3}]})", "[1, 2, 3]12[3, 1][1, 3]{'n': 1}2"},
    {"{{ 'a,b'.split(',') }}{{ ' x '.strip() }}{{ 'ab'.startswith('a') }}{{ 'ab'.endswith('a') "
     "}}{{ d.get('k', 'no') }}{{ d.get('z') }}{{ d.keys()|list }}{{ '{} {}'.format(1, 'a') }}",
     R"({"d": {"k": 1}})", "['a', 'b']xTrueFalse1None['k']1 a"},
    {"{{ 'x' in 'xy' }}{{ 2 in [1, 2] }}{{ 'k' in d }}{{ 'z' not in d }}{{ 1 < 2 < 3 }}{{ 1 == "
     "1.0 }}{{ [1] == [1] }}{{ true and 'v' }}{{ 0 or 'w' }}",
     R"({"d": {"k": 1}})", "TrueTrueTrueTrueTrueTrueTruevw"},
    {"{{ '{\\n'|indent(4, first=true) }}|{{ 'a\\nb\\n\\nc'|indent(2) }}", "{}",
     "    {\n|a\n  b\n\n  c"},
    {"{{ 'a'|safe + \"'<\" }}|{{ 'x' ~ 'a'|safe }}|{{ '<'|e }}", "{}", "a&#39;&lt;|xa|&lt;"},
    {"{{ d['items'] }}{{ n.foo }}{{ s.foo }}{{ d.items is defined }}{{ d.items == 5 }}",
     R"({"d": {"items": 5}, "n": null, "s": "str"})", "5TrueFalse"},
    {"{{ 3|string + 'x' }}{{ '42'|int + 1 }}{{ 'x'|int }}{{ 2|float }}{{ 2.567|round(2) }}{{ "
     "2.5|round }}{{ '%s-%d'|format('a', 3) }}",
     "{}", "3x4302.02.572.0a-3"},
    {"{{ 1e20 }} {{ 1e-5 }} {{ 0.0001 }} {{ 1.0e16 }} {{ 123456789.125 }} {{ 0.1 + 0.2 }}", "{}",
     "1e+20 1e-05 0.0001 1e+16 123456789.125 0.30000000000000004"},
    {"{{ \"\\u00e9\\x41\\n\" }}{{ 'a' 'b' }}", "{}", "éA\nab"},
    {"{{ {'b': 1, 'a': 2}|dictsort }}{{ [3, 1, 2]|sort }}{{ ['b', 'A']|sort }}{{ [1, 2]|sum "
     "}}{{ [4, 9]|max }}{{ 'abc'|reverse }}",
     "{}", "[('a', 2), ('b', 1)][1, 2, 3]['A', 'b']39cba"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1, 2) %}{{ t }}{{ t|list }}", "{}",
     "12(1, 2)[1, 2]"},
    {"{% for m in msgs %}{% if loop.previtem is defined %}{{ loop.previtem }}<{% endif %}{{ m "
     "}}{% if loop.nextitem %}>{{ loop.nextitem }}{% endif %};{% endfor %}",
     R"({"msgs": ["a", "b"]})", "a>b;a<b;"},
    {"{% raw %}{{ not }}{% endraw %}x", "{}", "{{ not }}x"},
    {"{{ x is string }}{{ x is mapping }}{{ d is mapping }}{{ xs is iterable }}{{ 1 is number "
     "}}{{ true is boolean }}{{ 1 is integer }}{{ u is iterable }}{{ 6 is divisibleby 3 }}",
     R"({"x": "s", "d": {}, "xs": []})", "TrueFalseTrueTrueTrueTrueTrueTrueTrue"},
};

}  // namespace hinge::testing
