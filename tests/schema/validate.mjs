#!/usr/bin/env node
// validate.mjs - checks the HTTP exchanges recorded by the end-to-end tests
// (tests/lib/e2e.c, PETREL_E2E_RECORD: one JSON line per exchange) against
// openapi.yaml.  For each record it finds the operation whose path template
// matches the concrete path (as gateway/router.c does: percent-decoded
// path, '{x}' = one non-empty segment, the console's '{path}' = the rest)
// and fails on
//   - a status the operation does not declare (and no 'NXX' or 'default'),
//   - a response Content-Type the declared response does not list, or a
//     body where the response declares none,
//   - a JSON body that does not validate against the declared schema, or an
//     error body whose error.status is not the HTTP status,
//   - on a 2xx answer: a query parameter the operation does not declare, or
//     a request Content-Type its requestBody does not list.
// A path that no template matches (404 tests) or a method the path does not
// declare (405 tests) is checked only to be the API.md error body (the
// spec's Error schema, error.status = the HTTP status).  HEAD is checked as
// GET without a body.
//
// Usage: node tests/schema/validate.mjs [--spec openapi.yaml] RECORD.jsonl
// Exit status 1 on any failure or when there is no record.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import ORVModule from 'openapi-response-validator';

const ResponseValidator = ORVModule.default ?? ORVModule;
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
// Templates whose last parameter takes the rest of the path, slashes
// included and possibly empty (the route table's '{path*}').
const GREEDY = new Set(['/console/{path}']);

function usage(msg) {
    console.error(`validate.mjs: ${msg}`);
    console.error('usage: node tests/schema/validate.mjs [--spec openapi.yaml] RECORD.jsonl');
    process.exit(2);
}

const args = process.argv.slice(2);
let specFile = fileURLToPath(new URL('../../openapi.yaml', import.meta.url));
let recordFile = null;
for (let i = 0; i < args.length; i++) {
    if (args[i] === '--spec') specFile = args[++i] ?? usage('--spec needs a file');
    else if (!recordFile) recordFile = args[i];
    else usage(`unexpected argument '${args[i]}'`);
}
if (!recordFile) usage('no record file');

const spec = parseYaml(readFileSync(specFile, 'utf8'));
const components = spec.components ?? {};

// ---- spec helpers -----------------------------------------------------------

// Follows a local '$ref' ('#/components/responses/X'); other objects as is.
function deref(obj) {
    for (let n = 0; obj && obj.$ref && n < 16; n++) {
        if (!obj.$ref.startsWith('#/')) throw new Error(`unsupported $ref ${obj.$ref}`);
        obj = obj.$ref
            .slice(2)
            .split('/')
            .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
            .reduce((o, k) => (o ? o[k] : undefined), spec);
        if (!obj) throw new Error('dangling $ref');
    }
    return obj;
}

const templates = Object.keys(spec.paths ?? {}).map((tpl) => {
    const segs = tpl.split('/').slice(1);
    return {
        tpl,
        segs,
        greedy: GREEDY.has(tpl),
        literals: segs.filter((s) => !/^\{.*\}$/.test(s)).length,
    };
});

function matchTemplate(t, segs) {
    const n = t.segs.length;
    if (t.greedy ? segs.length < n : segs.length !== n) return false;
    for (let i = 0; i < n; i++) {
        const p = t.segs[i];
        const isParam = /^\{.*\}$/.test(p);
        if (t.greedy && i === n - 1) return true; // the rest, possibly empty
        if (isParam ? segs[i] === '' : p !== segs[i]) return false;
    }
    return true;
}

// The path template for a decoded path: literal segments win over
// parameters (OpenAPI's rule; the router has no overlapping routes).
function findTemplate(path) {
    const segs = path.split('/').slice(1);
    if (!path.startsWith('/')) return null;
    const hits = templates.filter((t) => matchTemplate(t, segs));
    hits.sort((a, b) => b.literals - a.literals);
    return hits[0] ?? null;
}

// MHD's unescaping of the path: %XX becomes the byte, anything else stays.
function decodePath(raw) {
    const bytes = [];
    const src = Buffer.from(raw, 'utf8');
    for (let i = 0; i < src.length; i++) {
        const hex = src.subarray(i + 1, i + 3).toString('latin1');
        if (src[i] === 0x25 && /^[0-9a-fA-F]{2}$/.test(hex)) {
            bytes.push(parseInt(hex, 16));
            i += 2;
        } else {
            bytes.push(src[i]);
        }
    }
    return Buffer.from(bytes).toString('latin1'); // one char per byte; '/' intact
}

function mediaType(ct) {
    return (ct ?? '').split(';')[0].trim().toLowerCase();
}

function isJson(mt) {
    return mt === 'application/json' || mt.endsWith('+json');
}

// The declared media type key of 'content' that 'mt' falls under.
function findMedia(content, mt) {
    const keys = Object.keys(content);
    return (
        keys.find((k) => k.toLowerCase() === mt) ??
        keys.find((k) => k.toLowerCase() === `${mt.split('/')[0]}/*`) ??
        keys.find((k) => k === '*/*') ??
        null
    );
}

function statusKey(responses, status) {
    const s = String(status);
    if (s in responses) return s;
    if (`${s[0]}XX` in responses) return `${s[0]}XX`;
    if ('default' in responses) return 'default';
    return null;
}

// Compiled validators by schema: the responses that share one (most error
// answers: a $ref to Error) share its validator, which keeps compiling cheap.
const validators = new Map();
function validatorFor(response, mt) {
    const media = response.content[mt];
    const key = JSON.stringify(media.schema ?? null);
    if (!validators.has(key)) {
        const one = { description: '', content: { 'application/json': media } };
        validators.set(key, new ResponseValidator({ responses: { 200: one }, components }));
    }
    return validators.get(key);
}

const errorResponse = {
    description: 'API.md error',
    content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
};
if (!components.schemas?.Error) usage(`${specFile} has no components.schemas.Error`);

function formatErrors(res) {
    return res.errors
        .map((e) => `${e.path ? `${e.path}: ` : ''}${e.message}`)
        .slice(0, 8)
        .join('; ');
}

// ---- checks -----------------------------------------------------------------

// Problems of a JSON body against 'response' under media type 'mt'.
function checkJson(rec, response, mt, problems) {
    let body;
    try {
        body = JSON.parse(rec.body);
    } catch (e) {
        problems.push(`body is not JSON (${e.message})`);
        return;
    }
    const res = validatorFor(response, mt).validateResponse(200, body);
    if (res) problems.push(`body does not match the schema: ${formatErrors(res)}`);
    const err = body && typeof body === 'object' ? body.error : undefined;
    if (rec.status >= 400 && err && typeof err === 'object' && err.status !== rec.status) {
        problems.push(`error.status ${err.status} is not the HTTP status ${rec.status}`);
    }
}

// An answer outside the spec's operations: the API.md error body.
function checkGenericError(rec, problems) {
    if (rec.status < 400) problems.push(`status ${rec.status} where an error was expected`);
    if (rec.method === 'HEAD') return;
    if (mediaType(rec.contentType) !== 'application/json') {
        problems.push(`Content-Type '${rec.contentType}' is not application/json`);
        return;
    }
    checkJson(rec, errorResponse, 'application/json', problems);
}

function checkOperation(rec, t, op, problems) {
    const responses = op.responses ?? {};
    const sk = statusKey(responses, rec.status);
    if (!sk) {
        problems.push(`status ${rec.status} is not declared (declared: ${Object.keys(responses).join(', ')})`);
        return null;
    }
    const response = deref(responses[sk]);
    const content = response.content ?? {};
    const mt = mediaType(rec.contentType);
    const hasBody = (rec.body ?? rec.bodyBase64 ?? '').length > 0;
    if (Object.keys(content).length === 0) {
        if (hasBody) problems.push(`response ${sk} declares no body, got ${rec.contentType ?? 'no Content-Type'}`);
    } else if (!rec.contentType) {
        if (hasBody) problems.push(`response ${sk} got a body without Content-Type`);
        else if (rec.method !== 'HEAD') problems.push(`response ${sk} declares a body, got none`);
    } else {
        const declared = findMedia(content, mt);
        if (!declared) {
            problems.push(`Content-Type '${rec.contentType}' is not declared for ${sk} (${Object.keys(content).join(', ')})`);
        } else if (isJson(mt) && rec.method !== 'HEAD') {
            if (rec.body === undefined) problems.push('JSON body is not valid UTF-8');
            else checkJson(rec, response, declared, problems);
        }
    }
    if (rec.status >= 200 && rec.status < 300) checkRequest(rec, t, op, problems);
    return sk;
}

// On a 2xx answer the request itself used only what the spec declares.
function checkRequest(rec, t, op, problems) {
    const q = rec.path.indexOf('?');
    if (q >= 0) {
        const params = [...(spec.paths[t.tpl].parameters ?? []), ...(op.parameters ?? [])].map(deref);
        const names = new Set(params.filter((p) => p.in === 'query').map((p) => p.name));
        for (const name of new URLSearchParams(rec.path.slice(q + 1)).keys()) {
            if (!names.has(name)) problems.push(`query parameter '${name}' is not declared`);
        }
    }
    if (rec.requestContentType && op.requestBody) {
        const rb = deref(op.requestBody);
        if (!findMedia(rb.content ?? {}, mediaType(rec.requestContentType))) {
            problems.push(`request Content-Type '${rec.requestContentType}' is not declared`);
        }
    }
}

// ---- main -------------------------------------------------------------------

let lines;
try {
    lines = readFileSync(recordFile, 'utf8').split('\n').filter((l) => l.trim() !== '');
} catch (e) {
    console.error(`validate.mjs: cannot read '${recordFile}': ${e.message}`);
    process.exit(1);
}

const counts = new Map(); // "operationId" -> Map(status -> n)
const failures = [];
let validated = 0;
lines.forEach((line, i) => {
    let rec;
    try {
        rec = JSON.parse(line);
    } catch (e) {
        failures.push({ where: `${recordFile}:${i + 1}`, problems: [`not JSON: ${e.message}`] });
        return;
    }
    const problems = [];
    const method = String(rec.method).toUpperCase();
    rec.method = method;
    const rawPath = String(rec.path);
    const path = decodePath(rawPath.split('?')[0]);
    const t = findTemplate(path);
    const item = t ? spec.paths[t.tpl] : null;
    const opMethod = method === 'HEAD' && item && !item.head ? 'get' : method.toLowerCase();
    const op = item && METHODS.includes(opMethod) ? item[opMethod] : null;
    let label;
    if (!t) {
        label = '(no such path)';
        checkGenericError(rec, problems);
    } else if (!op) {
        label = `(method not allowed: ${t.tpl})`;
        checkGenericError(rec, problems);
    } else {
        label = op.operationId ?? `${opMethod.toUpperCase()} ${t.tpl}`;
        if (method === 'HEAD') label += ' (HEAD)';
        checkOperation(rec, t, op, problems);
    }
    validated++;
    if (!counts.has(label)) counts.set(label, new Map());
    const byStatus = counts.get(label);
    byStatus.set(rec.status, (byStatus.get(rec.status) ?? 0) + 1);
    if (problems.length) {
        failures.push({ where: `${recordFile}:${i + 1}`, rec, label, problems });
    }
});

console.log(`${validated} responses validated against ${specFile}`);
for (const [label, byStatus] of [...counts].sort((a, b) => a[0].localeCompare(b[0]))) {
    const total = [...byStatus.values()].reduce((a, b) => a + b, 0);
    const detail = [...byStatus].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}x${n}`).join(' ');
    console.log(`  ${label.padEnd(56)} ${String(total).padStart(5)}  ${detail}`);
}
// Informational: declared operations no test exercised.
const seen = new Set([...counts.keys()]);
const unexercised = [];
for (const [tpl, item] of Object.entries(spec.paths ?? {})) {
    for (const m of METHODS) {
        if (item[m] && !seen.has(item[m].operationId ?? `${m.toUpperCase()} ${tpl}`)) {
            unexercised.push(item[m].operationId ?? `${m.toUpperCase()} ${tpl}`);
        }
    }
}
if (unexercised.length) console.log(`operations without a recorded exchange: ${unexercised.join(', ')}`);

for (const f of failures) {
    console.log(`FAIL ${f.where}`);
    if (f.rec) {
        const req = f.rec.requestBody !== undefined ? ` ${JSON.stringify(f.rec.requestBody).slice(0, 200)}` : '';
        const ct = f.rec.requestContentType ? ` (${f.rec.requestContentType})` : '';
        console.log(`  request:  ${f.rec.method} ${f.rec.path}${ct}${req}`);
        const body = f.rec.body ?? `(base64) ${f.rec.bodyBase64 ?? ''}`;
        console.log(`  response: ${f.rec.status} ${f.rec.contentType ?? '(no Content-Type)'} ${body.slice(0, 300)}`);
        console.log(`  operation: ${f.label}`);
    }
    for (const p of f.problems) console.log(`  - ${p}`);
}
if (validated === 0) {
    console.log(`FAIL no recorded exchange in ${recordFile}`);
    process.exit(1);
}
console.log(`${failures.length} of ${validated} responses failed validation`);
process.exit(failures.length ? 1 : 0);
