#!/usr/bin/env python3
"""Reference renderer for chat templates: Python jinja2 set up as Hugging Face transformers does.

Usage:
  render-chat-template.py [JOB.json]      (or the job on stdin)
A job is a JSON object with "template_path" (or "template", the source itself) and either
  "context":  one render context  -> prints the rendered string; on a template error prints
              "error: <message>" to stderr and exits 1;
  "contexts": a list of contexts  -> prints a JSON list of {"ok": true, "text": ...} or
              {"ok": false, "error": ...}, one per context, in order.
A file may also hold {"jobs": [job, ...]} of "contexts" jobs: prints a JSON list of their lists.
The environment matches transformers' _compile_jinja_template: ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks and loopcontrols, a tojson filter that is json.dumps(ensure_ascii=False,
indent, separators, sort_keys), and the globals raise_exception(msg) and strftime_now(fmt).
"""
import json
import sys
from datetime import datetime

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:  # the C++ test looks for this exit code and skips
    sys.stderr.write("python3 jinja2 is missing: install python3-jinja2\n")
    sys.exit(3)


class TemplateRaised(Exception):
    pass


def raise_exception(message):
    raise TemplateRaised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def compile_template(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def render(template, context):
    return template.render(**context)


def run_batch(job):
    if "template" in job:
        source = job["template"]
    else:
        with open(job["template_path"], encoding="utf-8", newline="") as f:
            source = f.read()
    try:
        template = compile_template(source)
    except Exception as e:  # noqa: BLE001
        return [{"ok": False, "error": f"{type(e).__name__}: {e}"} for _ in job["contexts"]]
    results = []
    for context in job["contexts"]:
        try:
            results.append({"ok": True, "text": render(template, context)})
        except Exception as e:  # noqa: BLE001
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    return results


def main():
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as f:
            job = json.load(f)
    else:
        job = json.load(sys.stdin)
    if "jobs" in job:
        sys.stdout.write(json.dumps([run_batch(j) for j in job["jobs"]], ensure_ascii=False))
        return 0
    if "contexts" in job:
        sys.stdout.write(json.dumps(run_batch(job), ensure_ascii=False))
        return 0
    if "template" in job:
        source = job["template"]
    else:
        with open(job["template_path"], encoding="utf-8", newline="") as f:
            source = f.read()
    try:
        template = compile_template(source)
    except Exception as e:  # noqa: BLE001 - a syntax error is a result, not a crash
        sys.stderr.write(f"error: {type(e).__name__}: {e}\n")
        return 1
    try:
        sys.stdout.write(render(template, job.get("context", {})))
    except Exception as e:  # noqa: BLE001
        sys.stderr.write(f"error: {type(e).__name__}: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
