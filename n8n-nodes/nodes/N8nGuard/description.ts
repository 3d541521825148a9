import type { INodeProperties } from 'n8n-workflow';

export type Operation = 'reserve' | 'complete' | 'fail' | 'lookup' | 'resolve';

const onlyFor = (...operation: Operation[]) => ({ show: { operation } });

export const operationProperty: INodeProperties = {
	displayName: 'Operation',
	name: 'operation',
	type: 'options',
	noDataExpression: true,
	default: 'reserve',
	options: [
		{
			name: 'Complete',
			value: 'complete',
			description: 'Record that the side effect took effect',
			action: 'Complete a reservation',
		},
		{
			name: 'Fail',
			value: 'fail',
			description: 'Record that the side effect did not take effect, or that its outcome is unknown',
			action: 'Fail a reservation',
		},
		{
			name: 'Lookup',
			value: 'lookup',
			description: 'Read the record of a key',
			action: 'Look up a key',
		},
		{
			name: 'Reserve',
			value: 'reserve',
			description:
				'Reserve a key before a side effect; route items to Proceed, Already Done, Blocked or Parked',
			action: 'Reserve a key',
		},
		{
			name: 'Resolve',
			value: 'resolve',
			description: 'Reconcile a key by hand (a person checked what happened)',
			action: 'Resolve a key',
		},
	],
};

// Reserve, Lookup and Resolve name the key themselves.
const identityRequired: INodeProperties[] = [
	{
		displayName: 'Namespace',
		name: 'namespace',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'crm-contacts',
		description:
			'One namespace per kind of side effect: lowercase letters, digits, dot, dash and underscore',
		displayOptions: onlyFor('reserve', 'lookup', 'resolve'),
	},
	{
		displayName: 'Key',
		name: 'key',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'e.g. {{ $json.event_id }}',
		description:
			'The stable ID of one event, usually an expression such as the source event ID or a booking number. Never an e-mail address.',
		displayOptions: onlyFor('reserve', 'lookup', 'resolve'),
	},
];

// Complete and Fail can take everything from the Reserve step upstream.
const identityFromReservation: INodeProperties[] = [
	{
		displayName: 'Namespace',
		name: 'namespace',
		type: 'string',
		default: '',
		placeholder: 'crm-contacts',
		description: 'Leave empty to use the namespace of the Reserve step upstream',
		displayOptions: onlyFor('complete', 'fail'),
	},
	{
		displayName: 'Key',
		name: 'key',
		type: 'string',
		default: '',
		description: 'Leave empty to use the key of the Reserve step upstream',
		displayOptions: onlyFor('complete', 'fail'),
	},
	{
		displayName: 'Token',
		name: 'token',
		type: 'string',
		typeOptions: { password: true },
		default: '',
		description:
			'The token of the accepted reservation. Leave empty to take it from the Reserve step upstream (matched by namespace and key).',
		displayOptions: onlyFor('complete', 'fail'),
	},
];

const reserveFields: INodeProperties[] = [
	{
		displayName: 'Owner',
		name: 'owner',
		type: 'string',
		default: '=n8n execution {{ $execution.id }}',
		description: 'Who holds the lease, shown to the person who resolves a stuck key',
		displayOptions: onlyFor('reserve'),
	},
	{
		displayName: 'Wait While In Progress (Seconds)',
		name: 'waitInProgress',
		type: 'number',
		typeOptions: { minValue: 0, maxValue: 600 },
		default: 30,
		description:
			'When another execution holds the key, ask again for up to this long, so a copy that arrives while the first one is still working leaves by Already Done (or Proceed, if the first one failed) instead of Blocked. 0 answers at once.',
		displayOptions: onlyFor('reserve'),
	},
	{
		displayName: 'Options',
		name: 'reserveOptions',
		type: 'collection',
		placeholder: 'Add option',
		default: {},
		displayOptions: onlyFor('reserve'),
		options: [
			{
				displayName: 'Destination',
				name: 'destination',
				type: 'string',
				default: '',
				placeholder: 'hubspot',
				description:
					'The target system, for its circuit breaker: while it is open, items leave by Blocked with outcome destination_paused, or by Parked with Park When Paused',
			},
			{
				displayName: 'Fingerprint',
				name: 'fingerprint',
				type: 'string',
				default: '',
				description:
					'Your own hash of the payload (at most 128 characters), used instead of Payload to detect a key reused for another event',
			},
			{
				displayName: 'Lease (Seconds)',
				name: 'leaseSeconds',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 86400 },
				default: 300,
				description:
					'How long the reservation holds before it counts as stuck; without it the namespace default applies',
			},
			{
				displayName: 'Park When Paused (Resume URL)',
				name: 'resumeUrl',
				type: 'string',
				default: '={{ $execution.resumeUrl }}',
				description:
					'While the destination is paused (outage or maintenance window), or while the event waits for a person\'s approval (a namespace with approval: required, which needs this option), park the event instead of leaving by Blocked: the item leaves by the Parked output, which goes to a Wait node set to resume On Webhook Call; n8n-guard calls this URL when the destination is back or the event was approved or rejected. Keep the default, this execution\'s resume URL.',
			},
			{
				displayName: 'Payload',
				name: 'payload',
				type: 'json',
				default: '{}',
				description:
					'The data of the event. n8n-guard stores only its hash and answers key_reused when the same key comes with different data.',
			},
			{
				displayName: 'Requested By',
				name: 'requestedBy',
				type: 'string',
				default: '',
				placeholder: 'e.g. {{ $json.body.submitted_by }}',
				description:
					'Who triggered the event, where known (a form\'s submitter, a ticket\'s author; at most 128 characters). In a namespace that requires approval with four eyes, that person may not approve or reject it.',
			},
			{
				displayName: 'Summary',
				name: 'summary',
				type: 'string',
				default: '',
				placeholder: "e.g. Invoice {{ $json.body.number }} · {{ $json.body.amount }} EUR · {{ $json.body.customer }}",
				description:
					'What the event is, in one line, for the person who approves it or acts on the key: shown in the approval request in Slack and in the console. Line breaks become spaces and it is cut to 200 characters; e-mail addresses and secrets in it are masked by n8n-guard.',
			},
		],
	},
];

const completeFields: INodeProperties[] = [
	{
		displayName: 'Result Reference',
		name: 'resultRef',
		type: 'string',
		default: '',
		placeholder: 'crm-contact-789',
		description: 'What the side effect created, such as the ID of the new CRM contact (at most 512 characters)',
		displayOptions: onlyFor('complete'),
	},
	{
		displayName: 'Options',
		name: 'completeOptions',
		type: 'collection',
		placeholder: 'Add option',
		default: {},
		displayOptions: onlyFor('complete'),
		options: [
			{
				displayName: 'Result',
				name: 'result',
				type: 'json',
				default: '{}',
				description:
					'A small JSON object (at most 16 KiB) returned to later duplicates of this event',
			},
			{
				displayName: 'Via',
				name: 'via',
				type: 'options',
				default: 'primary',
				options: [
					{ name: 'Primary', value: 'primary' },
					{ name: 'Fallback', value: 'fallback' },
				],
				description: 'Whether the primary path or a fallback did the work (counted separately)',
			},
		],
	},
];

const failFields: INodeProperties[] = [
	{
		displayName: 'Reason',
		name: 'reason',
		type: 'options',
		default: 'auto',
		options: [
			{
				name: 'Auto (From the Error on the Item)',
				value: 'auto',
				description:
					'Classify the error that the failed node left on the item (its error output): 502/504 (a gateway lost the answer) outcome unknown, other 5xx/429 failed, other 4xx validation, connection refused/DNS/TLS unreachable, anything else (timeouts, resets) outcome unknown',
			},
			{
				name: 'Destination Failed',
				value: 'destination_failed',
				description: 'The target answered with a transient failure (5xx other than 502/504, 429); nothing was written, a later attempt may try again',
			},
			{
				name: 'Destination Unreachable',
				value: 'destination_unreachable',
				description:
					'The request provably never reached the target (DNS, connection refused, TLS); opens its circuit breaker',
			},
			{
				name: 'Outcome Unknown',
				value: 'outcome_unknown',
				description:
					'Timeout or lost answer after the target may have acted; the key waits for a person',
			},
			{
				name: 'Validation Failed',
				value: 'validation_failed',
				description: 'The target rejected the data (4xx); later reserves answer rejected',
			},
		],
		displayOptions: onlyFor('fail'),
	},
	{
		displayName: 'Retryable',
		name: 'retryable',
		type: 'boolean',
		default: true,
		description: 'Whether a later reserve may start a new attempt',
		displayOptions: { show: { operation: ['fail'], reason: ['destination_failed'] } },
	},
	{
		displayName: 'Message',
		name: 'message',
		type: 'string',
		default: '',
		placeholder: 'e.g. HTTP 503 from CRM',
		description:
			'What went wrong, for the person who looks at the key (cut to 2000 characters). Empty with Auto: the message of the error on the item.',
		displayOptions: onlyFor('fail'),
	},
];

const resolveFields: INodeProperties[] = [
	{
		displayName: 'Resolution',
		name: 'resolution',
		type: 'options',
		default: 'completed',
		options: [
			{
				name: 'Completed',
				value: 'completed',
				description: 'The side effect did take effect: later duplicates are Already Done',
			},
			{
				name: 'Failed',
				value: 'failed',
				description: 'The side effect did not take effect: the next reserve may try again',
			},
		],
		displayOptions: onlyFor('resolve'),
	},
	{
		displayName: 'By',
		name: 'by',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'office manager',
		description: 'Who checked and decided',
		displayOptions: onlyFor('resolve'),
	},
	{
		displayName: 'Note',
		name: 'note',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'checked the Sent folder: mail went out',
		description: 'What was checked, kept in the history of the key',
		displayOptions: onlyFor('resolve'),
	},
	{
		displayName: 'Options',
		name: 'resolveOptions',
		type: 'collection',
		placeholder: 'Add option',
		default: {},
		displayOptions: onlyFor('resolve'),
		options: [
			{
				displayName: 'Force',
				name: 'force',
				type: 'boolean',
				default: false,
				description: 'Whether to resolve a key that is still reserved (its lease has not run out)',
			},
			{
				displayName: 'Result Reference',
				name: 'resultRef',
				type: 'string',
				default: '',
				description: 'What the side effect created, when it is known',
			},
		],
	},
];

export const nodeProperties: INodeProperties[] = [
	operationProperty,
	...identityRequired,
	...identityFromReservation,
	...reserveFields,
	...completeFields,
	...failFields,
	...resolveFields,
];
