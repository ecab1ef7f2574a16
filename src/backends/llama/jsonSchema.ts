// From a client's JSON Schema (OpenAI strict mode, zod's `zodTextFormat`) to the subset node-llama-cpp 3.21.1's
// `createGrammarForJsonSchema` enforces faithfully, and the grammar text hardened where that subset is looser than JSON
// Schema validators. Pure: no node-llama-cpp import.
//
// Invariant: every document the resulting grammar admits is valid against the client's schema. What cannot be
// guaranteed is refused with RequestRefusedError('invalid_json_schema') naming the keyword and where (param
// `text.format.schema.<path>`), never dropped: node-llama-cpp silently ignores `pattern`/bounds, turns `anyOf`, type
// arrays with objects and `{}` into "only null", and unknown formats into "only \"\"" (docs/hardware.md, "Structured
// output on local models"; docs/lmsp.md). Where the grammar is *narrower* than the schema the output stays
// valid, so these are accepted: `required` (every listed property is always generated), absent or true
// `additionalProperties` next to `properties` (no extra keys are generated), `oneOf` (alternatives; the rare document
// matching two is accepted).

import { RequestRefusedError } from '../../runtime/backend';

type Json = unknown;
type Node = Record<string, Json>;

/** Keywords that annotate and constrain nothing. */
const ANNOTATIONS = new Set(['$schema', '$id', '$comment', 'title', 'description', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly']);
const DEFS_KEYWORDS = new Set(['$defs', 'definitions']);
/** String formats node-llama-cpp has a grammar for (the date ones are narrowed in hardenGrammar). */
const FORMATS = new Set(['date', 'time', 'date-time']);
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null', 'object', 'array']);
/**
 * The hardened integer rule admits at most 15 digits (hardenGrammar), so bounds at or beyond ±(10^15 − 1) always hold;
 * zod's `.int()` adds ±Number.MAX_SAFE_INTEGER.
 */
export const INTEGER_LIMIT = 999_999_999_999_999;
/**
 * Largest `minLength`/`maxLength`, `minItems`/`maxItems` and `minProperties`/`maxProperties` a grammar is built for
 * (see Translator.count). llama.cpp's grammar parser (llama-grammar.cpp, MAX_REPETITION_THRESHOLD 2000) fails a
 * repetition of 2000 or more and silently drops an upper bound above 2000, so a string bound stops below it; item and
 * property counts repeat a group that may itself hold a repetition, hence the lower cap.
 */
export const MAX_LENGTH_BOUND = 1999;
export const MAX_ITEMS_BOUND = 1024;
export const MAX_PROPERTIES_BOUND = 1024;
/** Deepest nesting of schemas: node-llama-cpp's converter and ours recurse per level. */
export const MAX_SCHEMA_DEPTH = 64;
/** Text a grammar cannot carry faithfully: control characters (NUL included) and halves of a surrogate pair. */
const UNSAFE_TEXT = /[\u0000-\u001f\u007f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const ROOT_DEF = '__root';

/** Keywords each kind of node may carry, besides annotations. */
const ALLOWED: Record<string, ReadonlySet<string>> = {
  string: new Set(['type', 'minLength', 'maxLength', 'format']),
  number: new Set(['type']),
  integer: new Set(['type', 'minimum', 'maximum']),
  boolean: new Set(['type']),
  null: new Set(['type']),
  object: new Set(['type', 'properties', 'required', 'additionalProperties', 'minProperties', 'maxProperties']),
  array: new Set(['type', 'items', 'prefixItems', 'minItems', 'maxItems', 'uniqueItems']),
};

/** The node-llama-cpp schema for `json_object`: any JSON object. */
export const JSON_OBJECT_SCHEMA: Readonly<Node> = { type: 'object', additionalProperties: true };

class Translator {
  usesRoot = false;
  private readonly defNames: Set<string>;

  constructor(
    private readonly defs: Record<string, Json>,
    private readonly param: string,
  ) {
    this.defNames = new Set(Object.keys(defs));
  }

  refuse(path: string, message: string): never {
    throw new RequestRefusedError('invalid_json_schema', `Invalid schema: ${message} (at ${path || 'the root'}).`, `${this.param}${path}`);
  }

  private depth = 0;

  node(s: Json, path: string): Node {
    if (this.depth >= MAX_SCHEMA_DEPTH) this.refuse(path, `schemas nested deeper than ${MAX_SCHEMA_DEPTH} levels cannot be enforced`);
    this.depth++;
    try {
      return this.nodeAt(s, path);
    } finally {
      this.depth--;
    }
  }

  private nodeAt(s: Json, path: string): Node {
    if (s === true || s === false || typeof s !== 'object' || s === null || Array.isArray(s)) {
      this.refuse(path, 'a schema must be an object with a type; boolean schemas cannot be enforced');
    }
    const n = s as Node;
    const keys = Object.keys(n).filter((k) => !ANNOTATIONS.has(k) && !DEFS_KEYWORDS.has(k));
    const base: Node = typeof n.description === 'string' ? { description: n.description } : {};
    const only = (allowed: string[], what: string) => {
      for (const k of keys) if (!allowed.includes(k)) this.refuse(`${path}.${k}`, `"${k}" cannot be combined with ${what}`);
    };

    if ('$ref' in n) {
      only(['$ref'], '"$ref"');
      return { ...base, $ref: this.ref(n.$ref, `${path}.$ref`) };
    }
    for (const alt of ['anyOf', 'oneOf'] as const) {
      if (!(alt in n)) continue;
      only([alt], `"${alt}"`);
      const list = n[alt];
      if (!Array.isArray(list) || list.length === 0) this.refuse(`${path}.${alt}`, `"${alt}" must be a non-empty array`);
      return { ...base, oneOf: list.map((a, i) => this.node(a, `${path}.${alt}[${i}]`)) };
    }
    if ('const' in n || 'enum' in n) {
      const kw = 'const' in n ? 'const' : 'enum';
      only([kw, 'type'], `"${kw}"`);
      const values = kw === 'const' ? [n.const] : n.enum;
      if (!Array.isArray(values) || values.length === 0) this.refuse(`${path}.enum`, '"enum" must be a non-empty array');
      const types = 'type' in n ? this.types(n.type, `${path}.type`) : undefined;
      values.forEach((v, i) => {
        const at = kw === 'const' ? `${path}.const` : `${path}.enum[${i}]`;
        if (v !== null && !['string', 'number', 'boolean'].includes(typeof v))
          this.refuse(at, 'only string, number, boolean and null values can be enforced');
        if (types && !types.some((t) => matchesType(v, t))) this.refuse(at, `the value does not match "type"`);
        if (typeof v === 'string') this.text(v, at, 'a value');
      });
      return kw === 'const' ? { ...base, const: n.const } : { ...base, enum: n.enum };
    }
    if (!('type' in n)) {
      // No type: any value would do; generating the kind its keywords describe is valid.
      if ('properties' in n) return this.typed({ ...n, type: 'object' }, 'object', path, keys, base);
      if ('items' in n || 'prefixItems' in n) return this.typed({ ...n, type: 'array' }, 'array', path, keys, base);
      const first = keys[0];
      if (first) this.refuse(`${path}.${first}`, `"${first}" cannot be enforced`);
      this.refuse(path, 'a schema without "type" (any value) cannot be enforced; give a type');
    }
    const types = this.types(n.type, `${path}.type`);
    if (types.length === 1) return this.typed(n, types[0]!, path, keys, base);
    // A type list: one alternative per type, each with the keywords that apply to it.
    return {
      ...base,
      oneOf: types.map((t) =>
        this.typed(
          n,
          t,
          path,
          keys.filter((k) => k === 'type' || ALLOWED[t]!.has(k) || !anyTypeAllows(k)),
          {},
        ),
      ),
    };
  }

  private types(t: Json, path: string): string[] {
    const list = Array.isArray(t) ? t : [t];
    if (list.length === 0) this.refuse(path, '"type" must not be empty');
    for (const x of list) if (typeof x !== 'string' || !TYPES.has(x)) this.refuse(path, `unknown type ${JSON.stringify(x)}`);
    return [...new Set(list as string[])];
  }

  private typed(n: Node, type: string, path: string, keys: string[], base: Node): Node {
    const allowed = ALLOWED[type]!;
    for (const k of keys) {
      if (!allowed.has(k)) {
        this.refuse(`${path}.${k}`, anyTypeAllows(k) ? `"${k}" does not apply to type "${type}"` : `"${k}" cannot be enforced by the grammar`);
      }
    }
    switch (type) {
      case 'string': {
        const out: Node = { ...base, type: 'string' };
        if ('format' in n) {
          if (typeof n.format !== 'string' || !FORMATS.has(n.format)) {
            this.refuse(`${path}.format`, `format ${JSON.stringify(n.format)} cannot be enforced (supported: ${[...FORMATS].join(', ')})`);
          }
          if ('minLength' in n || 'maxLength' in n)
            this.refuse(`${path}.${'minLength' in n ? 'minLength' : 'maxLength'}`, 'lengths cannot be combined with "format"');
          return { ...out, format: n.format };
        }
        const min = this.count(n, 'minLength', path);
        const max = this.count(n, 'maxLength', path);
        if (min !== undefined && max !== undefined && min > max) this.refuse(`${path}.minLength`, '"minLength" is above "maxLength"');
        return { ...out, ...(min !== undefined ? { minLength: min } : {}), ...(max !== undefined ? { maxLength: max } : {}) };
      }
      case 'integer':
        for (const [k, ok] of [
          ['minimum', (v: number) => v <= -INTEGER_LIMIT],
          ['maximum', (v: number) => v >= INTEGER_LIMIT],
        ] as const) {
          if (k in n && (typeof n[k] !== 'number' || !ok(n[k]))) {
            this.refuse(
              `${path}.${k}`,
              `"${k}" cannot be enforced by the grammar (only bounds beyond ±${INTEGER_LIMIT}, which every generated integer keeps)`,
            );
          }
        }
        return { ...base, type: 'integer' };
      case 'number':
      case 'boolean':
      case 'null':
        return { ...base, type };
      case 'object':
        return this.object(n, path, base);
      default:
        return this.array(n, path, base);
    }
  }

  private object(n: Node, path: string, base: Node): Node {
    const props = n.properties ?? {};
    if (typeof props !== 'object' || props === null || Array.isArray(props)) this.refuse(`${path}.properties`, '"properties" must be an object');
    const names = Object.keys(props);
    for (const k of names) this.text(k, `${path}.properties${segment(k)}`, 'a property name');
    const properties = Object.fromEntries(names.map((k) => [k, this.node((props as Node)[k], `${path}.properties${segment(k)}`)]));
    if ('required' in n) {
      if (!Array.isArray(n.required)) this.refuse(`${path}.required`, '"required" must be an array');
      n.required.forEach((r, i) => {
        if (typeof r !== 'string' || !names.includes(r))
          this.refuse(`${path}.required[${i}]`, `required property ${JSON.stringify(r)} is not in "properties"`);
      });
    }
    const ap = n.additionalProperties;
    if (ap !== undefined && typeof ap !== 'boolean' && (typeof ap !== 'object' || ap === null || Array.isArray(ap))) {
      this.refuse(`${path}.additionalProperties`, '"additionalProperties" must be a boolean or a schema');
    }
    const min = this.count(n, 'minProperties', path);
    const max = this.count(n, 'maxProperties', path);
    if (names.length > 0) {
      // Exactly the listed properties are generated: extra keys never appear, so counts must admit that number.
      if (min !== undefined && names.length < min)
        this.refuse(`${path}.minProperties`, `"minProperties" exceeds the ${names.length} properties generated`);
      if (max !== undefined && names.length > max)
        this.refuse(`${path}.maxProperties`, `"maxProperties" is below the ${names.length} properties generated`);
      return { ...base, type: 'object', properties, additionalProperties: false };
    }
    if (ap === false) {
      if (min !== undefined && min > 0) this.refuse(`${path}.minProperties`, '"minProperties" cannot be met without properties');
      return { ...base, type: 'object', properties: {}, additionalProperties: false };
    }
    // A free-form object: node-llama-cpp generates keys itself, with values of the given schema (or any JSON).
    const values = typeof ap === 'object' && ap !== null ? this.node(ap, `${path}.additionalProperties`) : true;
    if (min !== undefined && max !== undefined && min > max) this.refuse(`${path}.minProperties`, '"minProperties" is above "maxProperties"');
    return {
      ...base,
      type: 'object',
      additionalProperties: values,
      ...(min !== undefined ? { minProperties: min } : {}),
      ...(max !== undefined ? { maxProperties: max } : {}),
    };
  }

  private array(n: Node, path: string, base: Node): Node {
    if (n.uniqueItems === true) this.refuse(`${path}.uniqueItems`, '"uniqueItems" cannot be enforced by the grammar');
    const out: Node = { ...base, type: 'array' };
    if ('prefixItems' in n) {
      if (!Array.isArray(n.prefixItems)) this.refuse(`${path}.prefixItems`, '"prefixItems" must be an array');
      out.prefixItems = n.prefixItems.map((s, i) => this.node(s, `${path}.prefixItems[${i}]`));
    }
    if ('items' in n) {
      if (Array.isArray(n.items)) this.refuse(`${path}.items`, 'tuple "items" (an array) is not supported; use "prefixItems"');
      if (n.items === false) {
        if (!('prefixItems' in n)) this.refuse(`${path}.items`, '"items": false needs "prefixItems"');
        out.items = false;
      } else {
        out.items = this.node(n.items, `${path}.items`);
      }
    } else {
      // Items of any kind are valid; node-llama-cpp would generate only null for them, which is valid too but
      // surprising: ask for a schema instead.
      if (!('prefixItems' in n)) this.refuse(path, 'an array needs an "items" schema');
    }
    const min = this.count(n, 'minItems', path);
    const max = this.count(n, 'maxItems', path);
    if (min !== undefined && max !== undefined && min > max) this.refuse(`${path}.minItems`, '"minItems" is above "maxItems"');
    const prefix = Array.isArray(out.prefixItems) ? out.prefixItems.length : 0;
    if (out.items === false && min !== undefined && min > prefix) this.refuse(`${path}.minItems`, '"minItems" exceeds the "prefixItems" allowed');
    if (max !== undefined && max < prefix) this.refuse(`${path}.maxItems`, '"maxItems" is below the number of "prefixItems"');
    return { ...out, ...(min !== undefined ? { minItems: min } : {}), ...(max !== undefined ? { maxItems: max } : {}) };
  }

  /** Refuses text a grammar cannot carry faithfully (UNSAFE_TEXT), naming what it is. */
  private text(v: string, path: string, what: string): void {
    if (UNSAFE_TEXT.test(v)) this.refuse(path, `${what} with a control character or half a surrogate pair cannot be enforced`);
  }

  private count(n: Node, k: string, path: string): number | undefined {
    if (!(k in n)) return undefined;
    const v = n[k];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) this.refuse(`${path}.${k}`, `"${k}" must be a non-negative integer`);
    // The grammar spells a bound out as that many repetitions: past these it takes seconds and gigabytes to build.
    const cap = /Items$/.test(k) ? MAX_ITEMS_BOUND : /Length$/.test(k) ? MAX_LENGTH_BOUND : MAX_PROPERTIES_BOUND;
    if (v > cap) this.refuse(`${path}.${k}`, `"${k}" above ${cap} cannot be enforced by the grammar`);
    return v;
  }

  private ref(r: Json, path: string): string {
    if (r === '#') {
      this.usesRoot = true;
      return `#/$defs/${ROOT_DEF}`;
    }
    const m = typeof r === 'string' ? /^#\/(\$defs|definitions)\/([^/~]+)$/.exec(r) : null;
    if (!m) this.refuse(path, `$ref ${JSON.stringify(r)} cannot be followed (only "#", "#/$defs/<name>" and "#/definitions/<name>")`);
    if (!this.defNames.has(m[2]!)) this.refuse(path, `$ref ${JSON.stringify(r)} names no definition`);
    return `#/$defs/${m[2]}`;
  }
}

function matchesType(v: Json, t: string): boolean {
  switch (t) {
    case 'null':
      return v === null;
    case 'integer':
      return Number.isInteger(v);
    case 'number':
      return typeof v === 'number';
    default:
      return typeof v === t;
  }
}

function anyTypeAllows(k: string): boolean {
  return Object.values(ALLOWED).some((s) => s.has(k));
}

/** `.properties.name`, or `.properties["odd key"]` when the key is not an identifier. */
function segment(k: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`;
}

/**
 * The node-llama-cpp schema for a client's schema, or RequestRefusedError naming what cannot be enforced. The root
 * `$defs` (or draft-07 `definitions`) become `$defs`; `$ref: "#"` (recursion through the root) refers to the root kept
 * as a definition.
 */
export function translateJsonSchema(schema: Record<string, unknown>, param = 'text.format.schema'): Record<string, unknown> {
  const rawDefs: Record<string, Json> = {};
  for (const k of DEFS_KEYWORDS) {
    const d = schema[k];
    if (d === undefined) continue;
    if (typeof d !== 'object' || d === null || Array.isArray(d)) {
      throw new RequestRefusedError('invalid_json_schema', `Invalid schema: "${k}" must be an object.`, `${param}.${k}`);
    }
    Object.assign(rawDefs, d);
  }
  if (ROOT_DEF in rawDefs) {
    throw new RequestRefusedError('invalid_json_schema', `Invalid schema: the definition name "${ROOT_DEF}" is reserved.`, `${param}.$defs`);
  }
  const t = new Translator(rawDefs, param);
  const defsPath = (name: string) => (schema.$defs && name in (schema.$defs as Node) ? `.$defs${segment(name)}` : `.definitions${segment(name)}`);
  const defs: Record<string, Node> = {};
  for (const [name, d] of Object.entries(rawDefs)) defs[name] = t.node(d, defsPath(name));
  const root = t.node(schema, '');
  const cycle = refCycle({ ...defs, [ROOT_DEF]: root });
  if (cycle) {
    const at = cycle[0] === ROOT_DEF ? '' : defsPath(cycle[0]);
    const names = cycle.map((c) => (c === ROOT_DEF ? '#' : c)).join(' → ');
    throw new RequestRefusedError(
      'invalid_json_schema',
      `Invalid schema: $ref cycle without an object or array between (${names}): it describes no document.`,
      `${param}${at}`,
    );
  }
  if (root.type !== 'object' && !('$ref' in root)) {
    // OpenAI's rule too: the output is an object (a root anyOf is refused there as well).
    throw new RequestRefusedError('invalid_json_schema', 'Invalid schema: the root must be of type "object".', `${param}.type`);
  }
  if (t.usesRoot) return { $defs: { ...defs, [ROOT_DEF]: root }, $ref: `#/$defs/${ROOT_DEF}` };
  return Object.keys(defs).length ? { ...root, $defs: defs } : root;
}

/** llama.cpp's grammar parser refuses (or, for an upper bound, drops) repetitions from this count on. */
export const GRAMMAR_REPETITION_LIMIT = 2000;

/**
 * Throws when GBNF text repeats anything `{m,n}` times at llama.cpp's limit or past it: its parser would fail
 * (writing the whole grammar to stderr) or drop the bound. Literals, character classes and comments are skipped.
 * The schema bounds (Translator.count) keep every grammar we build below it; this is the check that says so.
 */
export function checkGrammarRepetitions(gbnf: string): void {
  for (let i = 0; i < gbnf.length; i++) {
    const c = gbnf[i];
    if (c === '"' || c === '[') {
      const close = c === '"' ? '"' : ']';
      for (i++; i < gbnf.length && gbnf[i] !== close; i++) if (gbnf[i] === '\\') i++;
    } else if (c === '#') {
      while (i < gbnf.length && gbnf[i] !== '\n') i++;
    } else if (c === '{') {
      const m = /^\{(\d+)(?:,(\d*))?\}/.exec(gbnf.slice(i, i + 48));
      if (m && [m[1], m[2]].some((n) => n !== undefined && n !== '' && Number(n) >= GRAMMAR_REPETITION_LIMIT)) {
        throw new Error(`the grammar repeats a rule ${m[0]} times; llama.cpp's parser allows fewer than ${GRAMMAR_REPETITION_LIMIT}`);
      }
    }
  }
}

/**
 * node-llama-cpp's grammar text made faithful where its rules admit documents a JSON Schema validator rejects:
 * - integers: its rule admits exponents (`1e-5` is no integer, `1e999` parses to Infinity): at most 15 digits, no
 *   exponent (so every value is a safe integer, see INTEGER_LIMIT);
 * - numbers: an exponent of up to 16 digits overflows to Infinity: at most two digits;
 * - dates: any month may have day 29–31: only days each month has (February up to the 28th).
 * Throws when a rule it expects to rewrite has another shape (a different node-llama-cpp version).
 */
export function hardenGrammar(gbnf: string): string {
  const lines = gbnf.split('\n').map((line) => {
    if (line.startsWith('integer-number-rule ::= ')) return 'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14})';
    if (line.startsWith('fractional-number-rule ::= ')) {
      const exp = '([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?';
      if (!line.endsWith(exp)) throw new Error('unexpected number rule in the JSON grammar');
      return line.slice(0, -exp.length) + '([eE] [-+]? [0-9]{1,2})?';
    }
    if (line.startsWith('string-format-date-rule ::= ') || line.startsWith('string-format-date-time-rule ::= ')) {
      if (!line.includes(LOOSE_DATE)) throw new Error('unexpected date rule in the JSON grammar');
      return line.replace(LOOSE_DATE, STRICT_DATE);
    }
    return line;
  });
  return lines.join('\n');
}

const LOOSE_DATE = '[0-9]{4} "-" ("0" [1-9] | "1" [012]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])';
const STRICT_DATE =
  '[0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02" "-" ("0" [1-9] | "1" [0-9] | "2" [0-8]))';

/**
 * A chain of definitions that refer to one another without an object or array between them (`A: {$ref: B}`,
 * `B: {anyOf: [{$ref: A}, …]}`): a grammar rule that calls itself before reading anything, which llama.cpp's
 * parser cannot build. Recursion through an object's property or an array's items is fine (a tree). Returns the
 * cycle's definition names, or undefined.
 */
function refCycle(defs: Record<string, Node>): string[] | undefined {
  const direct = (n: Json): string[] => {
    if (!n || typeof n !== 'object') return [];
    const node = n as Node;
    if (typeof node.$ref === 'string') return [node.$ref.replace(/^#\/\$defs\//, '')];
    if (Array.isArray(node.oneOf)) return node.oneOf.flatMap(direct);
    return [];
  };
  const state = new Map<string, 'open' | 'done'>();
  const walk = (name: string, trail: string[]): string[] | undefined => {
    if (state.get(name) === 'done') return undefined;
    if (state.get(name) === 'open') return [...trail.slice(trail.indexOf(name)), name];
    state.set(name, 'open');
    for (const next of direct(defs[name])) {
      if (!(next in defs)) continue;
      const found = walk(next, [...trail, name]);
      if (found) return found;
    }
    state.set(name, 'done');
    return undefined;
  };
  for (const name of Object.keys(defs)) {
    const found = walk(name, []);
    if (found) return found;
  }
  return undefined;
}
