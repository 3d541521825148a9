import type {
	IAuthenticateGeneric,
	ICredentialTestRequest,
	ICredentialType,
	Icon,
	INodeProperties,
} from 'n8n-workflow';

export class N8nGuardApi implements ICredentialType {
	name = 'n8nGuardApi';

	displayName = 'N8n Guard API';

	icon: Icon = { light: 'file:../icons/n8nGuard.svg', dark: 'file:../icons/n8nGuard.dark.svg' };

	documentationUrl = 'https://github.com/n8n-guard/n8n-guard/tree/main/n8n-nodes#credential';

	properties: INodeProperties[] = [
		{
			displayName: 'Base URL',
			name: 'baseUrl',
			type: 'string',
			default: 'http://127.0.0.1:8080',
			placeholder: 'http://n8n-guard:8080',
			description: 'Where n8n-guard listens, without the /v1 path',
			required: true,
		},
		{
			displayName: 'Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			description: 'One of the tokens n8n-guard was started with (N8N_GUARD_TOKENS)',
			required: true,
		},
	];

	authenticate: IAuthenticateGeneric = {
		type: 'generic',
		properties: {
			headers: {
				Authorization: '=Bearer {{$credentials.token}}',
			},
		},
	};

	// A lookup is a question, never an error: 200 with a valid token, 401 without.
	test: ICredentialTestRequest = {
		request: {
			baseURL: '={{$credentials.baseUrl}}',
			url: '/v1/lookup',
			qs: {
				namespace: 'n8n-guard-credential-test',
				key: 'credential-test',
			},
		},
	};
}
