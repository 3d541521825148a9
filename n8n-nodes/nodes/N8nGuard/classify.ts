import type { IDataObject } from 'n8n-workflow';

export type FailReason =
	| 'destination_unreachable'
	| 'destination_failed'
	| 'validation_failed'
	| 'outcome_unknown';

// Transport errors that prove the request never reached the target.
const NEVER_ARRIVED = [
	'ECONNREFUSED',
	'ENOTFOUND',
	'EAI_AGAIN',
	'EHOSTUNREACH',
	'ENETUNREACH',
	'CERT_',
	'ERR_TLS_',
	'SELF_SIGNED_CERT',
	'DEPTH_ZERO_SELF_SIGNED_CERT',
	'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
	'UNABLE_TO_GET_ISSUER_CERT',
];

// n8n rewrites some of those codes into sentences (n8n-workflow COMMON_ERRORS).
const NEVER_ARRIVED_MESSAGES = [
	'refused the connection',
	'connection cannot be established',
	'host is unreachable',
	'DNS server returned an error',
];

/**
 * The fail reason for an item that left a node by its error output (or with
 * "Continue On Fail"). Anything that does not prove where the request ended
 * is outcome_unknown: a person decides, and nothing is written twice.
 */
export function classifyError(json: IDataObject): { reason: FailReason; message: string } {
	const raw = json.error;
	const error: IDataObject = typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as IDataObject) : {};
	const message =
		typeof raw === 'string' ? raw : [error.message, error.description].filter((m) => typeof m === 'string' && m).join(': ');
	const status = Number(error.status ?? error.httpCode ?? error.statusCode ?? json.statusCode);
	const code = String(error.code ?? '').toUpperCase();

	// 502 and 504 are a gateway's answer: it passed the request on and lost
	// (or gave up waiting for) the target's answer, so the write may have
	// happened.
	if (status === 502 || status === 504) {
		return { reason: 'outcome_unknown', message };
	}
	if (status === 429 || status === 408 || (status >= 500 && status <= 599)) {
		return { reason: 'destination_failed', message };
	}
	if (status >= 400 && status <= 499) {
		return { reason: 'validation_failed', message };
	}
	const text = `${code} ${message}`;
	if (
		NEVER_ARRIVED.some((c) => text.toUpperCase().includes(c)) ||
		NEVER_ARRIVED_MESSAGES.some((m) => message.toLowerCase().includes(m.toLowerCase()))
	) {
		return { reason: 'destination_unreachable', message };
	}
	return { reason: 'outcome_unknown', message };
}
