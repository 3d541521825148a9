'use strict';
// A stand-in that follows docs of shared/contract/api-v1.md, used ONLY when
// N8N_GUARD_TEST_SERVER=contract (while the real binary cannot be built).
// The normal test run starts the real n8n-guard binary instead.

const http = require('node:http');
const crypto = require('node:crypto');

const NAMESPACE = /^[a-z0-9][a-z0-9._-]*$/;

function startContractServer(token) {
	const keys = new Map(); // "ns\0key" -> record
	const breakers = new Map(); // destination -> { openUntil }

	const server = http.createServer((req, res) => {
		let raw = '';
		req.on('data', (c) => (raw += c));
		req.on('end', () => {
			const send = (status, body, type = 'application/json') => {
				res.writeHead(status, { 'content-type': type });
				res.end(JSON.stringify(body));
			};
			const problem = (status, code, detail, fields) =>
				send(
					status,
					{ type: `about:blank#${code}`, title: code, status, detail, code, ...(fields ? { fields } : {}) },
					'application/problem+json',
				);
			if (req.headers.authorization !== `Bearer ${token}`) {
				return problem(401, 'unauthorized', 'missing or wrong bearer token');
			}
			const url = new URL(req.url, 'http://x');
			let body = {};
			if (req.method === 'POST') {
				try {
					body = JSON.parse(raw);
				} catch {
					return problem(400, 'invalid_request', 'body is not JSON');
				}
			} else {
				body = Object.fromEntries(url.searchParams);
			}
			const ns = body.namespace;
			if (typeof ns !== 'string' || ns.length > 64 || !NAMESPACE.test(ns)) {
				return problem(400, 'invalid_request', 'invalid namespace', [{ field: 'namespace', rule: 'namespace' }]);
			}
			const key = typeof body.key === 'string' ? body.key.trim() : '';
			if (key === '' || Buffer.byteLength(key) > 255 || /[\x00-\x1f\x7f]/.test(key)) {
				return problem(400, 'invalid_key', 'key must be 1-255 bytes without control characters', [
					{ field: 'key', rule: 'key' },
				]);
			}
			if (/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(key)) {
				return problem(400, 'invalid_key', 'key looks like an e-mail address; use the source event ID or a hash');
			}
			const id = `${ns}\0${key}`;
			const rec = keys.get(id);
			const now = Date.now();
			const view = (r, extra) => ({ ...extra, ...publicRecord(r) });
			const event = (r, name, detail) => {
				r.history.push({ at: new Date().toISOString(), event: name, attempt: r.attempt, by: body.by || body.owner || '', detail: detail || '' });
				r.history = r.history.slice(-20);
				r.updated_at = new Date().toISOString();
			};

			switch (`${req.method} ${url.pathname}`) {
				case 'GET /v1/lookup':
					if (!rec) return send(200, { found: false, state: 'absent', namespace: ns, key });
					return send(200, view(rec, { found: true }));
				case 'POST /v1/reserve': {
					const fp =
						body.payload !== undefined
							? crypto.createHash('sha256').update(canonical(body.payload)).digest('hex')
							: body.fingerprint || null;
					if (rec && fp && rec.fingerprint && rec.fingerprint !== fp) {
						return problem(422, 'key_reused', `key ${key} was reserved with a different payload`);
					}
					if (body.destination) {
						const b = breakers.get(body.destination);
						if (b && b.openUntil > now) {
							return send(200, { outcome: 'destination_paused', proceed: false, retry_after_seconds: Math.ceil((b.openUntil - now) / 1000), namespace: ns, key, state: rec ? rec.state : 'absent' });
						}
					}
					const accept = (r) => {
						r.state = 'reserved';
						r.attempt += 1;
						r.token = crypto.randomBytes(16).toString('hex');
						r.owner = body.owner || '';
						r.lease_ms = now + 1000 * (body.lease_seconds || 300);
						r.destination = body.destination || r.destination || '';
						if (fp) r.fingerprint = fp;
						event(r, 'reserved');
						keys.set(id, r);
						return send(200, view(r, { outcome: 'accepted', proceed: true, token: r.token }));
					};
					if (!rec) {
						const at = new Date().toISOString();
						return accept({ namespace: ns, key, state: 'absent', attempt: 0, created_at: at, updated_at: at, history: [] });
					}
					if (rec.state === 'reserved' && rec.lease_ms > now) {
						return send(200, view(rec, { outcome: 'in_progress', proceed: false, retry_after_seconds: Math.ceil((rec.lease_ms - now) / 1000) }));
					}
					if (rec.state === 'reserved') {
						rec.state = 'unknown';
						event(rec, 'lease_expired');
					}
					if (rec.state === 'completed') return send(200, view(rec, { outcome: 'duplicate_event', proceed: false }));
					if (rec.state === 'unknown') return send(200, view(rec, { outcome: 'state_unknown', proceed: false }));
					if (rec.state === 'failed' && !rec.retryable) return send(200, view(rec, { outcome: 'rejected', proceed: false }));
					return accept(rec);
				}
				case 'POST /v1/complete':
				case 'POST /v1/fail': {
					if (!rec) return problem(404, 'not_found', `no record for ${key}`);
					if (typeof body.token !== 'string' || body.token !== rec.token) {
						return problem(409, 'stale_token', 'the token is not the one of the current attempt');
					}
					if (url.pathname === '/v1/complete') {
						if (rec.state !== 'completed') {
							rec.state = 'completed';
							rec.result_ref = body.result_ref || '';
							rec.result = body.result || null;
							rec.via = body.via || 'primary';
							event(rec, 'completed');
						}
						return send(200, view(rec, { outcome: 'completed' }));
					}
					rec.reason = body.reason;
					rec.message = body.message || '';
					if (body.reason === 'outcome_unknown') {
						rec.state = 'unknown';
					} else {
						rec.state = 'failed';
						rec.retryable = body.reason === 'validation_failed' ? false : body.retryable !== false;
					}
					if (body.reason === 'destination_unreachable' && rec.destination) {
						breakers.set(rec.destination, { openUntil: now + 300000 });
					}
					event(rec, 'failed', body.reason);
					const outcome = rec.state === 'unknown' ? 'state_unknown' : rec.retryable ? 'destination_failed' : 'rejected';
					return send(200, view(rec, { outcome }));
				}
				case 'POST /v1/resolve': {
					if (!body.by || !body.note) return problem(400, 'invalid_request', 'by and note are required');
					if (!rec) return problem(404, 'not_found', `no record for ${key}`);
					if (rec.state === 'reserved' && !body.force) return problem(409, 'conflict', 'key is reserved; use force');
					rec.resolved_by = body.by;
					rec.note = body.note;
					rec.resolved_at = new Date().toISOString();
					if (body.resolution === 'completed') {
						rec.state = 'completed';
						if (body.result_ref) rec.result_ref = body.result_ref;
					} else {
						rec.state = 'failed';
						rec.retryable = true;
					}
					event(rec, 'resolved', body.resolution);
					return send(200, view(rec, { outcome: body.resolution }));
				}
			}
			return problem(404, 'not_found', 'no such route');
		});
	});

	return new Promise((resolve) => {
		server.listen(0, '127.0.0.1', () => {
			resolve({
				baseUrl: `http://127.0.0.1:${server.address().port}`,
				stop: () => new Promise((r) => server.close(r)),
			});
		});
	});
}

function publicRecord(r) {
	const { token, lease_ms, fingerprint, ...rest } = r;
	return { ...rest, lease_expires_at: r.state === 'reserved' ? new Date(lease_ms).toISOString() : null };
}

function canonical(v) {
	if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
	if (v && typeof v === 'object') {
		return `{${Object.keys(v)
			.sort()
			.map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
			.join(',')}}`;
	}
	return JSON.stringify(v);
}

module.exports = { startContractServer };
