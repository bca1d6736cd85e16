"""validate.py SCHEMA SPEC [UPSTREAM_SCHEMA_DIR]: validates a CDI spec with python3-jsonschema.
Prints 'valid' or the errors (one a line) and exits 0/1; exits 77 when jsonschema is missing."""
import json
import os
import sys

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed")
    sys.exit(77)

schema = json.load(open(sys.argv[1]))
spec = json.load(open(sys.argv[2]))
errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(spec)]
if len(sys.argv) > 3:
    # The upstream schema refers to defs.json beside it.
    up = os.path.abspath(sys.argv[3])
    main = json.load(open(os.path.join(up, "schema.json")))
    resolver = jsonschema.RefResolver(base_uri="file://" + up + "/", referrer=main)
    errors += ["upstream: " + e.message for e in jsonschema.Draft7Validator(main, resolver=resolver).iter_errors(spec)]
for m in errors:
    print(m)
if not errors:
    print("valid")
sys.exit(1 if errors else 0)
