// A schema adapter written in JavaScript: the proof that the `edgar:schema` contract is
// language-neutral. Built into a component by ComponentizeJS (`build.mjs`) and checked
// by `edgar guard check` in the tests. Its policy is its own (not a port of the
// reference adapter): names as `server__tool` or sanitized with an FNV-1a hash, schemas
// reduced to JSON Schema 2020-12 keywords with local references only, results as text,
// media and links. It lowers for the generic profile only and refuses the others.

const MAX_NAME = 64;
const HASH_HEX = 10;
const MAX_SERVER_IN_HASHED = 20;
const MAX_DESCRIPTION = 2048;
const MAX_SCHEMA_TEXT = 1024;
const MAX_SCHEMA = 256 * 1024;
const MAX_DEPTH = 32;
const MAX_ENUM = 1000;
const MAX_PATTERN = 1000;
const MAX_NOTES = 64;
const MAX_TEXT = 100000;
const MAX_BLOCKS = 1000;
const MAX_OUTPUT = 6 * 1024 * 1024;
const MAX_MEDIA = 5 * 1024 * 1024;
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];
const AUDIO_TYPES = ['audio/wav', 'audio/mpeg', 'audio/ogg', 'audio/webm', 'audio/flac', 'audio/aac', 'audio/mp4'];

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function refuse(kind, message) {
  // ComponentizeJS turns a thrown `{ payload }` into the `err` of a WIT result.
  return { payload: { kind, message } };
}

/** `s` cut to at most `max` UTF-8 bytes, on a character boundary. */
function clamp(s, max) {
  const bytes = encoder.encode(s);
  if (bytes.length <= max) return [s, false];
  let cut = decoder.decode(bytes.slice(0, max));
  if (cut.endsWith('\uFFFD')) cut = cut.slice(0, -1);
  return [cut, true];
}

function fnv1a(server, tool) {
  let h = 0xcbf29ce484222325n;
  const bytes = [...encoder.encode(server), 0xff, ...encoder.encode(tool)];
  for (const b of bytes) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h;
}

const allowed = (c) => /[A-Za-z0-9_-]/.test(c);

function clean(part, trailingUnderscoreOk) {
  return [...part].every(allowed) && !part.includes('__') && !part.startsWith('_')
    && (trailingUnderscoreOk || !part.endsWith('_'));
}

function sanitize(s, max, fallback) {
  let out = '';
  for (const c of s) {
    const d = allowed(c) && c.length === 1 ? c : '_';
    if (d === '_' && (out === '' || out.endsWith('_'))) continue;
    out += d;
  }
  out = out.replace(/_+$/, '').slice(0, max).replace(/_+$/, '');
  return out === '' ? fallback : out;
}

function toolName(server, tool) {
  for (const [what, s] of [['server', server], ['tool', tool]]) {
    if (s === '') throw refuse('invalid-name', `the ${what} name is empty`);
  }
  if (clean(server, false) && clean(tool, true) && server.length + 2 + tool.length <= MAX_NAME) {
    return `${server}__${tool}`;
  }
  const hash = (fnv1a(server, tool) >> BigInt(64 - 4 * HASH_HEX)).toString(16).padStart(HASH_HEX, '0');
  const serverPart = sanitize(server, MAX_SERVER_IN_HASHED, 'mcp');
  const room = MAX_NAME - serverPart.length - 4 - HASH_HEX;
  return `${serverPart}__${sanitize(tool, room, 'tool')}__${hash}`;
}

/** The drop notes of one tool, bounded. */
class Notes {
  constructor() { this.list = []; this.more = 0; }
  add(path, reason) {
    if (this.list.length < MAX_NOTES) this.list.push({ path: clamp(path, 200)[0], reason });
    else this.more += 1;
  }
  done() {
    if (this.more > 0) this.list.push({ path: '', reason: `${this.more} more changes not listed` });
    return this.list;
  }
}

const escape = (key) => key.replace(/~/g, '~0').replace(/\//g, '~1');
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const TYPES = ['null', 'boolean', 'object', 'array', 'number', 'string', 'integer'];
const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];
const SCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SCHEMA_ONE = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains',
  'propertyNames', 'unevaluatedProperties', 'unevaluatedItems'];
const COUNTS = ['minLength', 'maxLength', 'minItems', 'maxItems', 'minProperties', 'maxProperties',
  'minContains', 'maxContains'];

/** Resolves a local `#/a/b` reference against `root`. */
function resolve(root, ref) {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let at = root;
  for (const raw of ref.slice(2).split('/')) {
    let seg;
    try { seg = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~'); } catch { return undefined; }
    if (at === null || typeof at !== 'object' || !Object.hasOwn(at, seg)) return undefined;
    at = at[seg];
  }
  return at;
}

/** A schema reduced to the 2020-12 keywords the host validates with; notes say what went. */
function cleanSchema(schema, path, depth, notes, refs) {
  if (typeof schema === 'boolean') return schema;
  if (!isObject(schema)) {
    notes.add(path, 'not a schema; allows anything');
    return true;
  }
  if (depth >= MAX_DEPTH) {
    notes.add(path, `nested deeper than ${MAX_DEPTH} levels; not validated`);
    return {};
  }
  const out = {};
  for (const [key, value] of Object.entries(schema)) {
    const at = `${path}/${escape(key)}`;
    let kept;
    if (SCHEMA_MAPS.includes(key)) {
      if (isObject(value)) {
        kept = {};
        for (const [k, v] of Object.entries(value)) kept[k] = cleanSchema(v, `${at}/${escape(k)}`, depth + 1, notes, refs);
      }
    } else if (SCHEMA_LISTS.includes(key)) {
      if (Array.isArray(value) && value.length > 0) kept = value.map((v, i) => cleanSchema(v, `${at}/${i}`, depth + 1, notes, refs));
    } else if (key === 'items' && Array.isArray(value)) {
      notes.add(at, 'tuple form kept as prefixItems');
      out.prefixItems = value.map((v, i) => cleanSchema(v, `${at}/${i}`, depth + 1, notes, refs));
      continue;
    } else if (SCHEMA_ONE.includes(key)) {
      kept = cleanSchema(value, at, depth + 1, notes, refs);
    } else if (key === 'type') {
      const ok = (t) => TYPES.includes(t);
      if (typeof value === 'string' ? ok(value) : Array.isArray(value) && value.length > 0 && value.every(ok)) kept = value;
    } else if (key === 'required') {
      if (Array.isArray(value)) kept = [...new Set(value.filter((r) => typeof r === 'string'))];
    } else if (key === 'enum') {
      if (Array.isArray(value) && value.length > MAX_ENUM) { notes.add(at, `over ${MAX_ENUM} values; dropped`); continue; }
      if (Array.isArray(value) && value.length > 0) kept = value;
    } else if (key === 'const' || key === 'default' || key === 'examples') {
      kept = value;
    } else if (['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'].includes(key)) {
      if (typeof value === 'number') kept = value;
    } else if (key === 'multipleOf') {
      if (typeof value === 'number' && value > 0) kept = value;
    } else if (COUNTS.includes(key)) {
      if (Number.isInteger(value) && value >= 0) kept = value;
    } else if (['uniqueItems', 'readOnly', 'writeOnly', 'deprecated'].includes(key)) {
      if (typeof value === 'boolean') kept = value;
    } else if (key === 'pattern') {
      if (typeof value === 'string' && value.length <= MAX_PATTERN) kept = value;
    } else if (key === 'format' || key === 'contentEncoding' || key === 'contentMediaType') {
      if (typeof value === 'string') kept = value;
    } else if (key === 'description' || key === 'title') {
      if (typeof value === 'string') kept = clamp(value, MAX_SCHEMA_TEXT)[0];
    } else if (key === 'dependentRequired') {
      if (isObject(value) && Object.values(value).every((v) => Array.isArray(v) && v.every((s) => typeof s === 'string'))) kept = value;
    } else if (key === '$ref') {
      if (typeof value === 'string' && value.startsWith('#')) { kept = value; refs.push([at, value]); }
      else { notes.add(at, 'remote $ref refused (never fetched)'); continue; }
    } else {
      notes.add(at, key.startsWith('x-') ? 'vendor keyword; dropped' : 'keyword not kept; dropped');
      continue;
    }
    if (kept === undefined) notes.add(at, 'malformed value; dropped');
    else out[key] = kept;
  }
  return out;
}

/** Cleans a whole schema, then drops `$ref`s that do not resolve in the result. */
function cleanRoot(schema, path, notes) {
  const refs = [];
  const root = cleanSchema(schema, path, 0, notes, refs);
  for (const [at, ref] of refs) {
    if (resolve(root, ref) !== undefined) continue;
    const segs = at.slice(path.length + 1).split('/').slice(0, -1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
    let holder = root;
    for (const s of segs) holder = holder?.[s];
    if (isObject(holder)) delete holder.$ref;
    notes.add(at, 'local $ref does not resolve; dropped');
  }
  return root;
}

function toSchema(server, toolJson) {
  let tool;
  try { tool = JSON.parse(toolJson); } catch (e) { throw refuse('invalid-json', `the tool is not valid JSON: ${clamp(String(e.message), 200)[0]}`); }
  if (!isObject(tool)) throw refuse('invalid-json', 'the tool is not a JSON object');
  if (typeof tool.name !== 'string' || tool.name === '') throw refuse('invalid-name', 'the tool has no name');
  const notes = new Notes();
  let description = '';
  if (typeof tool.description === 'string') {
    const [d, cut] = clamp(tool.description, MAX_DESCRIPTION);
    if (cut) notes.add('/description', `clamped to ${MAX_DESCRIPTION} bytes`);
    description = d;
  }
  let input = tool.inputSchema ?? { type: 'object' };
  if (!isObject(input)) throw refuse('not-object-schema', 'the input schema is not an object');
  if (input.type === undefined) { input = { ...input, type: 'object' }; notes.add('/inputSchema/type', 'missing; "object" assumed'); }
  if (input.type !== 'object') throw refuse('not-object-schema', 'the input schema is not an object schema');
  const inputSchema = JSON.stringify(cleanRoot(input, '/inputSchema', notes));
  if (encoder.encode(inputSchema).length > MAX_SCHEMA) throw refuse('too-large', `the input schema is over ${MAX_SCHEMA} bytes`);
  let outputSchema;
  if (isObject(tool.outputSchema) && tool.outputSchema.type === 'object') {
    const text = JSON.stringify(cleanRoot(tool.outputSchema, '/outputSchema', notes));
    if (encoder.encode(text).length <= MAX_SCHEMA) outputSchema = text;
  }
  const a = isObject(tool.annotations) ? tool.annotations : {};
  const flag = (k) => (typeof a[k] === 'boolean' ? a[k] : undefined);
  const title = typeof tool.title === 'string' ? tool.title : (typeof a.title === 'string' ? a.title : undefined);
  return {
    name: tool.name,
    description,
    inputSchema,
    outputSchema,
    hints: {
      title: title === undefined ? undefined : clamp(title, 200)[0],
      readOnly: flag('readOnlyHint'),
      destructive: flag('destructiveHint'),
      idempotent: flag('idempotentHint'),
      openWorld: flag('openWorldHint'),
    },
    dropped: notes.done(),
  };
}

/** The decoded length of standard, padded base64, or -1 when it is not that. */
function base64Length(s) {
  if (typeof s !== 'string' || s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return -1;
  return (s.length / 4) * 3 - (s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0);
}

function textBlock(text) {
  const bytes = encoder.encode(text);
  if (bytes.length <= MAX_TEXT) return { tag: 'text', val: text };
  const half = Math.floor(MAX_TEXT / 2);
  const head = clamp(text, half)[0];
  const tail = decoder.decode(bytes.slice(bytes.length - half)).replace(/^\uFFFD+/, '');
  return { tag: 'text', val: `${head}\n[adapter cut ${bytes.length - MAX_TEXT} bytes here]\n${tail}` };
}

function block(item) {
  if (!isObject(item)) return textBlock('[a content block that is not an object was omitted]');
  const media = (types) => {
    const n = base64Length(item.data);
    if (!types.includes(item.mimeType) || n < 0 || n > MAX_MEDIA) return textBlock(`[a ${item.type} block of type ${clamp(String(item.mimeType), 60)[0]} was omitted]`);
    return { tag: item.type, val: { mimeType: item.mimeType, data: item.data } };
  };
  switch (item.type) {
    case 'text': return textBlock(typeof item.text === 'string' ? item.text : '');
    case 'image': return media(IMAGE_TYPES);
    case 'audio': return media(AUDIO_TYPES);
    case 'resource_link':
      if (typeof item.uri !== 'string' || item.uri === '' || item.uri.length > 8192 || /[\u0000-\u001f]/.test(item.uri)) break;
      return { tag: 'resource-link', val: { uri: item.uri, name: clamp(typeof item.name === 'string' ? item.name : item.uri, 1024)[0], description: undefined, mimeType: undefined } };
    case 'resource': {
      const r = item.resource;
      if (!isObject(r) || typeof r.uri !== 'string' || r.uri === '' || r.uri.length > 8192 || /[\u0000-\u001f]/.test(r.uri)) break;
      if (typeof r.text === 'string') return { tag: 'embedded', val: { uri: r.uri, mimeType: undefined, contents: { tag: 'text', val: clamp(r.text, MAX_TEXT)[0] } } };
      const n = base64Length(r.blob);
      if (n >= 0 && n <= MAX_MEDIA) return { tag: 'embedded', val: { uri: r.uri, mimeType: undefined, contents: { tag: 'blob', val: r.blob } } };
      break;
    }
    default: break;
  }
  return textBlock(`[a ${clamp(String(item.type), 40)[0]} block the adapter does not pass on was omitted]`);
}

function size(b) {
  const v = b.val;
  return typeof v === 'string' ? v.length : JSON.stringify(v).length;
}

function toResult(resultJson) {
  let result;
  try { result = JSON.parse(resultJson); } catch { throw refuse('invalid-json', 'the result is not valid JSON'); }
  if (!isObject(result)) throw refuse('invalid-json', 'the result is not a JSON object');
  const content = result.content ?? [];
  if (!Array.isArray(content)) throw refuse('invalid-json', "the result's content is not a list");
  const blocks = [];
  let bytes = 0;
  let omitted = 0;
  const push = (b) => {
    const n = size(b);
    if (omitted > 0 || blocks.length + 1 >= MAX_BLOCKS || bytes + n > MAX_OUTPUT) { omitted += 1; return; }
    bytes += n;
    blocks.push(b);
  };
  for (const item of content) push(block(item));
  if (result.structuredContent !== undefined && result.structuredContent !== null && !blocks.some((b) => b.tag === 'text')) {
    push(textBlock(JSON.stringify(result.structuredContent)));
  }
  if (omitted > 0) blocks.push({ tag: 'text', val: `[the adapter omitted ${omitted} more content blocks]` });
  return { isError: result.isError === true, blocks };
}

function lowerSchema(provider, inputSchema) {
  if (provider === 'generic') return { inputSchema, losses: [] };
  throw refuse('other', `this adapter lowers for the generic profile only, not ${provider}`);
}

export const adapter = { toolName, toSchema, toResult, lowerSchema };
