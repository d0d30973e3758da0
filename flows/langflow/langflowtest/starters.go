package langflowtest

// Fixtures in the shape of Langflow 1.7's 33 starter projects
// (src/backend/base/langflow/initial_setup/starter_projects): the same component types,
// display names, the fields the importer reads and the same edges between the same
// outputs and fields, written for these tests with values of their own — short prompts
// with the starters' variables, example URLs, small settings — and none of the Python
// code a Langflow export embeds. Positions are the starters', rounded.

// Starter is one fixture: the starter project's file name (without .json) and its export.
type Starter struct {
	File   string
	Export func() []byte
}

// Starters are the fixtures of the 33 starter projects, in the order of their files.
var Starters = []Starter{
	{"Basic Prompt Chaining", basicPromptChaining},
	{"Basic Prompting", basicPrompting},
	{"Blog Writer", blogWriter},
	{"Custom Component Generator", customComponentGenerator},
	{"Document Q&A", documentQA},
	{"Financial Report Parser", financialReportParser},
	{"Hybrid Search RAG", hybridSearchRag},
	{"Image Sentiment Analysis", imageSentimentAnalysis},
	{"Instagram Copywriter", instagramCopywriter},
	{"Invoice Summarizer", invoiceSummarizer},
	{"Knowledge Ingestion", knowledgeIngestion},
	{"Knowledge Retrieval", knowledgeRetrieval},
	{"Market Research", marketResearch},
	{"Meeting Summary", meetingSummary},
	{"Memory Chatbot", memoryChatbot},
	{"News Aggregator", newsAggregator},
	{"Nvidia Remix", nvidiaRemix},
	{"Pokédex Agent", pokedexAgent},
	{"Portfolio Website Code Generator", portfolioWebsiteCodeGenerator},
	{"Price Deal Finder", priceDealFinder},
	{"Research Agent", researchAgent},
	{"Research Translation Loop", researchTranslationLoop},
	{"SEO Keyword Generator", seoKeywordGenerator},
	{"SaaS Pricing", saasPricing},
	{"Search agent", searchAgent},
	{"Sequential Tasks Agents", sequentialTasksAgents},
	{"Simple Agent", simpleAgent},
	{"Social Media Agent", socialMediaAgent},
	{"Text Sentiment Analysis", textSentimentAnalysis},
	{"Travel Planning Agents", travelPlanningAgents},
	{"Twitter Thread Generator", twitterThreadGenerator},
	{"Vector Store RAG", vectorStoreRag},
	{"Youtube Analysis", youtubeAnalysis},
}

func basicPromptChaining() []byte {
	return Export("Basic Prompt Chaining", []Node{
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: 1950, Y: 1000},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 1550, Y: 450},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 3250, Y: 1250},
		{ID: "Prompt-2", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: 2400, Y: 1300},
		{ID: "Prompt-3", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: 1500, Y: 700},
	}, []Edge{
		{From: "ChatInput-1", Output: "message", To: "Prompt-3", Field: "tool_placeholder"},
		{From: "Prompt-3", Output: "prompt", To: "Prompt-1", Field: "tool_placeholder"},
		{From: "Prompt-1", Output: "prompt", To: "Prompt-2", Field: "tool_placeholder"},
		{From: "Prompt-2", Output: "prompt", To: "ChatOutput-1", Field: "input_value"},
	})
}

func basicPrompting() []byte {
	return Export("Basic Prompting", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 700, Y: 750},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: 700, Y: 1050},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1450, Y: 850},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 1100, Y: 800},
	}, []Edge{
		{From: "ChatInput-1", Output: "message", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-1", Field: "system_message"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
	})
}

func blogWriter() []byte {
	return Export("Blog Writer", []Node{
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nReferences: {references}\nInstructions: {instructions}", "references": "", "instructions": ""}, X: 1350, Y: 450},
		{ID: "TextInput-1", Type: "TextInput", Title: "Instructions", Fields: map[string]any{"input_value": "Text typed into Instructions."}, X: 950, Y: 400},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2100, Y: 600},
		{ID: "ParserComponent-1", Type: "ParserComponent", Title: "Parser", Fields: map[string]any{"mode": "Parser", "pattern": "text={text}", "sep": "\n"}, X: 950, Y: 700},
		{ID: "URLComponent-1", Type: "URLComponent", Title: "URL", Fields: map[string]any{"urls": []string{"https://docs.example.com/page-1"}, "max_depth": 1, "format": "Text", "timeout": 30}, X: 500, Y: 650},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 1700, Y: 450},
	}, []Edge{
		{From: "TextInput-1", Output: "text", To: "Prompt-1", Field: "instructions"},
		{From: "ParserComponent-1", Output: "parsed_text", To: "Prompt-1", Field: "references"},
		{From: "URLComponent-1", Output: "page_results", To: "ParserComponent-1", Field: "input_data"},
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
	})
}

func customComponentGenerator() []byte {
	return Export("Custom Component Generator", []Node{
		{ID: "Memory-1", Type: "Memory", Title: "Chat Memory", Fields: map[string]any{"mode": "Retrieve", "n_messages": 20, "order": "Ascending", "sender_type": "Machine and User", "template": "{sender_name}: {text}"}, X: 1850, Y: 1150},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nBase component code: {BASE_COMPONENT_CODE}\nCustom component code: {CUSTOM_COMPONENT_CODE}\nExample components: {EXAMPLE_COMPONENTS}\nChat history: {CHAT_HISTORY}\nUser input: {USER_INPUT}", "BASE_COMPONENT_CODE": "", "CUSTOM_COMPONENT_CODE": "", "EXAMPLE_COMPONENTS": "", "CHAT_HISTORY": "", "USER_INPUT": ""}, X: 2200, Y: 500},
		{ID: "URL-1", Type: "URL", Title: "URL", Fields: map[string]any{"urls": []string{"https://docs.example.com/page-1"}, "max_depth": 1, "format": "Text", "timeout": 30}, X: 1400, Y: 100},
		{ID: "URL-2", Type: "URL", Title: "URL", Fields: map[string]any{"urls": []string{"https://docs.example.com/page-1", "https://docs.example.com/page-2", "https://docs.example.com/page-3", "https://docs.example.com/page-4", "https://docs.example.com/page-5", "https://docs.example.com/page-6", "https://docs.example.com/page-7"}, "max_depth": 1, "format": "Text", "timeout": 30}, X: 1800, Y: 300},
		{ID: "URL-3", Type: "URL", Title: "URL", Fields: map[string]any{"urls": []string{"https://docs.example.com/page-1"}, "max_depth": 1, "format": "Text", "timeout": 30}, X: 1500, Y: 850},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1550, Y: 1300},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 3000, Y: 850},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 2600, Y: 550},
	}, []Edge{
		{From: "ChatInput-1", Output: "message", To: "Prompt-1", Field: "USER_INPUT"},
		{From: "Memory-1", Output: "messages_text", To: "Prompt-1", Field: "CHAT_HISTORY"},
		{From: "URL-2", Output: "raw_results", To: "Prompt-1", Field: "EXAMPLE_COMPONENTS"},
		{From: "URL-3", Output: "raw_results", To: "Prompt-1", Field: "CUSTOM_COMPONENT_CODE"},
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
		{From: "URL-1", Output: "raw_results", To: "Prompt-1", Field: "BASE_COMPONENT_CODE"},
	})
}

func documentQA() []byte {
	return Export("Document Q&A", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 500, Y: 250},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1650, Y: 150},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nDocument: {Document}", "Document": ""}, X: 900, Y: -50},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-5", "provider": "OpenAI"}}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 1250, Y: -100},
		{ID: "File-1", Type: "File", Title: "Read File", Fields: map[string]any{"path": []any{}, "separator": "\n\n"}, X: 500, Y: -150},
	}, []Edge{
		{From: "ChatInput-1", Output: "message", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-1", Field: "system_message"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
		{From: "File-1", Output: "message", To: "Prompt-1", Field: "Document"},
	})
}

func financialReportParser() []byte {
	return Export("Financial Report Parser", []Node{
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2250, Y: 450},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 850, Y: 600},
		{ID: "StructuredOutput-1", Type: "StructuredOutput", Title: "Structured Output", Fields: map[string]any{"model": []any{}, "system_prompt": "Extract the fields.", "output_schema": []any{map[string]any{"name": "EBITDA", "type": "str", "description": "The EBITDA.", "multiple": "False"}, map[string]any{"name": "NET_INCOME", "type": "str", "description": "The NET_INCOME.", "multiple": "False"}, map[string]any{"name": "GROSS_PROFIT", "type": "str", "description": "The GROSS_PROFIT.", "multiple": "False"}}}, X: 1300, Y: 200},
		{ID: "ParserComponent-1", Type: "ParserComponent", Title: "Parser", Fields: map[string]any{"mode": "Parser", "pattern": "EBITDA={EBITDA} | NET_INCOME={NET_INCOME} | GROSS_PROFIT={GROSS_PROFIT}", "sep": "\n"}, X: 1750, Y: 150},
	}, []Edge{
		{From: "ChatInput-1", Output: "message", To: "StructuredOutput-1", Field: "input_value"},
		{From: "StructuredOutput-1", Output: "dataframe_output", To: "ParserComponent-1", Field: "input_data"},
		{From: "ParserComponent-1", Output: "parsed_text", To: "ChatOutput-1", Field: "input_value"},
	})
}

func hybridSearchRag() []byte {
	return Export("Hybrid Search RAG", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 50, Y: 250},
		{ID: "ParserComponent-1", Type: "ParserComponent", Title: "Parser", Fields: map[string]any{"mode": "Parser", "pattern": "keywords={keywords}", "sep": "\n"}, X: 1150, Y: 400},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2400, Y: 550},
		{ID: "ParserComponent-2", Type: "ParserComponent", Title: "Parser", Fields: map[string]any{"mode": "Parser", "pattern": "text={text}", "sep": "\n"}, X: 1950, Y: 450},
		{ID: "AstraDB-1", Type: "AstraDB", Title: "Astra DB", Fields: map[string]any{"collection_name": "", "number_of_results": 3, "search_method": "Hybrid Search", "search_score_threshold": 0, "token": "ASTRA_DB_APPLICATION_TOKEN"}, LoadFromDB: map[string]bool{"token": true}, X: 1550, Y: 200},
		{ID: "StructuredOutput-1", Type: "StructuredOutput", Title: "Structured Output", Fields: map[string]any{"model": []any{}, "system_prompt": "Extract the fields.", "output_schema": []any{map[string]any{"name": "keywords", "type": "str", "description": "The keywords.", "multiple": "False"}}}, X: 750, Y: 400},
	}, []Edge{
		{From: "ParserComponent-2", Output: "parsed_text", To: "ChatOutput-1", Field: "input_value"},
		{From: "ChatInput-1", Output: "message", To: "AstraDB-1", Field: "search_query"},
		{From: "ChatInput-1", Output: "message", To: "StructuredOutput-1", Field: "input_value"},
		{From: "StructuredOutput-1", Output: "dataframe_output", To: "ParserComponent-1", Field: "input_data"},
		{From: "ParserComponent-1", Output: "parsed_text", To: "AstraDB-1", Field: "lexical_terms"},
		{From: "AstraDB-1", Output: "dataframe", To: "ParserComponent-2", Field: "input_data"},
	})
}

func imageSentimentAnalysis() []byte {
	return Export("Image Sentiment Analysis", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1250, Y: 350},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2750, Y: 700},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: 1250, Y: 650},
		{ID: "parser-1", Type: "parser", Title: "Parser", Fields: map[string]any{"mode": "Parser", "pattern": "sentiment={sentiment} | description={description}", "sep": "\n"}, X: 2400, Y: 350},
		{ID: "StructuredOutput-1", Type: "StructuredOutput", Title: "Structured Output", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-5.1", "provider": "OpenAI"}}, "system_prompt": "Extract the fields.", "output_schema": []any{map[string]any{"name": "sentiment", "type": "str", "description": "The sentiment.", "multiple": "False"}, map[string]any{"name": "description", "type": "str", "description": "The description.", "multiple": "False"}}}, X: 2000, Y: 350},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-5.1", "provider": "OpenAI"}}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 1650, Y: 400},
	}, []Edge{
		{From: "parser-1", Output: "parsed_text", To: "ChatOutput-1", Field: "input_value"},
		{From: "StructuredOutput-1", Output: "structured_output", To: "parser-1", Field: "input_data"},
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-1", Field: "system_message"},
		{From: "ChatInput-1", Output: "message", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "StructuredOutput-1", Field: "input_value"},
	})
}

func instagramCopywriter() []byte {
	return Export("Instagram Copywriter", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 5200, Y: 3000},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nContext: {context}\nGuidelines: {guidelines}", "context": "", "guidelines": ""}, X: 6050, Y: 2950},
		{ID: "TextInput-1", Type: "TextInput", Title: "Text Input", Fields: map[string]any{"input_value": "Text typed into Text Input."}, X: 5650, Y: 3450},
		{ID: "Prompt-2", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nPost: {post}", "post": ""}, X: 6800, Y: 3050},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 8000, Y: 3400},
		{ID: "Prompt-3", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nPost: {post}\nImage description: {image_description}", "post": "", "image_description": ""}, X: 7600, Y: 3150},
		{ID: "TavilySearchComponent-1", Type: "TavilySearchComponent", Title: "Tavily AI Search", Fields: map[string]any{"max_results": 3}, ToolMode: true, X: 5200, Y: 3500},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 5650, Y: 2800},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 6400, Y: 3000},
		{ID: "LanguageModelComponent-2", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 7250, Y: 2900},
	}, []Edge{
		{From: "TextInput-1", Output: "text", To: "Prompt-1", Field: "guidelines"},
		{From: "Prompt-3", Output: "prompt", To: "ChatOutput-1", Field: "input_value"},
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "TavilySearchComponent-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "Prompt-3", Field: "post"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "Prompt-2", Field: "post"},
		{From: "Prompt-2", Output: "prompt", To: "LanguageModelComponent-2", Field: "input_value"},
		{From: "LanguageModelComponent-2", Output: "text_output", To: "Prompt-3", Field: "image_description"},
		{From: "Agent-1", Output: "response", To: "Prompt-1", Field: "context"},
	})
}

func invoiceSummarizer() []byte {
	return Export("Invoice Summarizer", []Node{
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: 550, Y: -550},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1500, Y: 250},
		{ID: "needle-1", Type: "needle", Title: "Needle Retriever", ToolMode: true, X: 550, Y: -150},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 550, Y: 450},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 1100, Y: -300},
	}, []Edge{
		{From: "Prompt-1", Output: "prompt", To: "Agent-1", Field: "system_prompt"},
		{From: "needle-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
	})
}

func knowledgeIngestion() []byte {
	return Export("Knowledge Ingestion", []Node{
		{ID: "SplitText-1", Type: "SplitText", Title: "Split Text", Fields: map[string]any{"chunk_size": 500, "chunk_overlap": 50, "separator": "\n"}, X: 600, Y: 50},
		{ID: "URLComponent-1", Type: "URLComponent", Title: "URL", Fields: map[string]any{"urls": []string{"https://docs.example.com/page-1"}, "max_depth": 2, "format": "Text", "timeout": 30}, X: 250, Y: 150},
		{ID: "KnowledgeIngestion-1", Type: "KnowledgeIngestion", Title: "Knowledge Ingestion", Fields: map[string]any{"knowledge_base": "product_notes", "chunk_size": 1000}, X: 1000, Y: 100},
	}, []Edge{
		{From: "URLComponent-1", Output: "page_results", To: "SplitText-1", Field: "data_inputs"},
		{From: "SplitText-1", Output: "dataframe", To: "KnowledgeIngestion-1", Field: "input_df"},
	})
}

func knowledgeRetrieval() []byte {
	return Export("Knowledge Retrieval", []Node{
		{ID: "TextInput-1", Type: "TextInput", Title: "Text Input", Fields: map[string]any{"input_value": "Text typed into Text Input."}, X: 250, Y: -300},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1050, Y: -200},
		{ID: "KnowledgeRetrieval-1", Type: "KnowledgeRetrieval", Title: "Knowledge Retrieval", Fields: map[string]any{"knowledge_base": "product_notes", "top_k": 3, "search_query": ""}, X: 650, Y: -350},
	}, []Edge{
		{From: "KnowledgeRetrieval-1", Output: "retrieve_data", To: "ChatOutput-1", Field: "input_value"},
		{From: "TextInput-1", Output: "text", To: "KnowledgeRetrieval-1", Field: "search_query"},
	})
}

func marketResearch() []byte {
	return Export("Market Research", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 450, Y: 900},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2500, Y: 850},
		{ID: "TavilySearchComponent-1", Type: "TavilySearchComponent", Title: "Tavily AI Search", Fields: map[string]any{"api_key": "TAVILY_API_KEY", "max_results": 3}, LoadFromDB: map[string]bool{"api_key": true}, ToolMode: true, X: 850, Y: 650},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 1250, Y: 450},
		{ID: "ParserComponent-1", Type: "ParserComponent", Title: "Parser", Fields: map[string]any{"mode": "Parser", "pattern": "domain={domain} | linkedinUrl={linkedinUrl} | cheapestPlan={cheapestPlan} | hasFreeTrial={hasFreeTrial} | hasEnterprisePlan={hasEnterprisePlan} | hasAPI={hasAPI} | market={market} | targetIndustries={targetIndustries} | pricingTiers={pricingTiers} | KeyFeatures={KeyFeatures}", "sep": "\n"}, X: 2100, Y: 750},
		{ID: "StructuredOutput-1", Type: "StructuredOutput", Title: "Structured Output", Fields: map[string]any{"model": []any{}, "system_prompt": "Extract the fields.", "output_schema": []any{map[string]any{"name": "domain", "type": "str", "description": "The domain.", "multiple": "False"}, map[string]any{"name": "linkedinUrl", "type": "str", "description": "The linkedinUrl.", "multiple": "False"}, map[string]any{"name": "cheapestPlan", "type": "str", "description": "The cheapestPlan.", "multiple": "False"}, map[string]any{"name": "hasFreeTrial", "type": "bool", "description": "The hasFreeTrial.", "multiple": "False"}, map[string]any{"name": "hasEnterprisePlan", "type": "bool", "description": "The hasEnterprisePlan.", "multiple": "False"}, map[string]any{"name": "hasAPI", "type": "bool", "description": "The hasAPI.", "multiple": "False"}, map[string]any{"name": "market", "type": "str", "description": "The market.", "multiple": "False"}, map[string]any{"name": "pricingTiers", "type": "str", "description": "The pricingTiers.", "multiple": "False"}, map[string]any{"name": "KeyFeatures", "type": "str", "description": "The KeyFeatures.", "multiple": "False"}, map[string]any{"name": "targetIndustries", "type": "str", "description": "The targetIndustries.", "multiple": "False"}}}, X: 1700, Y: 750},
	}, []Edge{
		{From: "TavilySearchComponent-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "ParserComponent-1", Output: "parsed_text", To: "ChatOutput-1", Field: "input_value"},
		{From: "Agent-1", Output: "response", To: "StructuredOutput-1", Field: "input_value"},
		{From: "StructuredOutput-1", Output: "dataframe_output", To: "ParserComponent-1", Field: "input_data"},
	})
}

func meetingSummary() []byte {
	return Export("Meeting Summary", []Node{
		{ID: "AssemblyAITranscriptionJobPoller-1", Type: "AssemblyAITranscriptionJobPoller", Title: "AssemblyAI Poll Transcript", Fields: map[string]any{"api_key": "ASSEMBLYAI_API_KEY"}, LoadFromDB: map[string]bool{"api_key": true}, X: 950, Y: 300},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nTranscript: {transcript}", "transcript": ""}, X: 1750, Y: 500},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2600, Y: 700},
		{ID: "ChatOutput-2", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1800, Y: 950},
		{ID: "ChatOutput-3", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2150, Y: 1700},
		{ID: "Prompt-2", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nHistory: {history}\nInput: {input}", "history": "", "input": ""}, X: 1200, Y: 1450},
		{ID: "Memory-1", Type: "Memory", Title: "Message History", Fields: map[string]any{"mode": "Retrieve", "n_messages": 20, "order": "Ascending", "sender_type": "Machine and User", "template": "{sender_name}: {text}"}, X: 600, Y: 1350},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 700, Y: 1850},
		{ID: "AssemblyAITranscriptionJobCreator-1", Type: "AssemblyAITranscriptionJobCreator", Title: "AssemblyAI Start Transcript", Fields: map[string]any{"api_key": "ASSEMBLYAI_API_KEY"}, LoadFromDB: map[string]bool{"api_key": true}, X: 500, Y: 250},
		{ID: "parser-1", Type: "parser", Title: "Parser", Fields: map[string]any{"mode": "Stringify", "pattern": "text={text}", "sep": "\n"}, X: 1300, Y: 400},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 2150, Y: 600},
		{ID: "LanguageModelComponent-2", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 1700, Y: 1450},
	}, []Edge{
		{From: "ChatInput-1", Output: "message", To: "Prompt-2", Field: "input"},
		{From: "AssemblyAITranscriptionJobCreator-1", Output: "transcript_id", To: "AssemblyAITranscriptionJobPoller-1", Field: "transcript_id"},
		{From: "AssemblyAITranscriptionJobPoller-1", Output: "transcription_result", To: "parser-1", Field: "input_data"},
		{From: "parser-1", Output: "parsed_text", To: "Prompt-1", Field: "transcript"},
		{From: "parser-1", Output: "parsed_text", To: "ChatOutput-2", Field: "input_value"},
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
		{From: "Prompt-2", Output: "prompt", To: "LanguageModelComponent-2", Field: "input_value"},
		{From: "LanguageModelComponent-2", Output: "text_output", To: "ChatOutput-3", Field: "input_value"},
		{From: "Memory-1", Output: "messages_text", To: "Prompt-2", Field: "history"},
	})
}

func memoryChatbot() []byte {
	return Export("Memory Chatbot", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 2300, Y: 350},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 3100, Y: 750},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nMemory: {memory}", "memory": ""}, X: 2350, Y: 650},
		{ID: "Memory-1", Type: "Memory", Title: "Message History", Fields: map[string]any{"mode": "Retrieve", "n_messages": 20, "order": "Ascending", "sender_type": "Machine and User", "template": "{sender_name}: {text}"}, X: 1850, Y: 650},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 2750, Y: 450},
	}, []Edge{
		{From: "Memory-1", Output: "messages_text", To: "Prompt-1", Field: "memory"},
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-1", Field: "system_message"},
		{From: "ChatInput-1", Output: "message", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
	})
}

func newsAggregator() []byte {
	return Export("News Aggregator", []Node{
		{ID: "AgentQL-1", Type: "AgentQL", Title: "Extract Web Data", Fields: map[string]any{"api_key": "AGENTQL_API_KEY"}, LoadFromDB: map[string]bool{"api_key": true}, ToolMode: true, X: 750, Y: 100},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 800, Y: 750},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1550, Y: 500},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 1150, Y: 250},
		{ID: "SaveToFile-1", Type: "SaveToFile", Title: "Write File", Fields: map[string]any{"file_name": "aggregated", "local_format": "json", "input": ""}, X: 1800, Y: 400},
	}, []Edge{
		{From: "AgentQL-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
		{From: "ChatOutput-1", Output: "message", To: "SaveToFile-1", Field: "input"},
	})
}

func nvidiaRemix() []byte {
	return Export("Nvidia Remix", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: -200, Y: 300},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 450, Y: 400},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 100, Y: -150},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nRemix documentation: {remix_documentation}\nRemix mcp server: {remix_mcp_server}\nMcp prompts: {mcp_prompts}", "remix_documentation": "Typed-in remix documentation.", "remix_mcp_server": "Typed-in remix mcp server.", "mcp_prompts": ""}, X: -350, Y: -750},
		{ID: "RemixDocumentation-1", Type: "RemixDocumentation", Title: "RTX Remix Documentation", Fields: map[string]any{"exclude_paths": []string{"changelog"}}, Edited: true, X: -800, Y: -350},
		{ID: "EmbeddingModel-1", Type: "EmbeddingModel", Title: "Embedding Model", Fields: map[string]any{"model": "text-embedding-3-small"}, X: -800, Y: 100},
		{ID: "FAISS-1", Type: "FAISS", Title: "FAISS", Fields: map[string]any{"index_name": "remix_docs", "number_of_results": 3}, ToolMode: true, X: -350, Y: -200},
		{ID: "MCPTools-1", Type: "MCPTools", Title: "MCP Connection", Fields: map[string]any{"mcp_server": map[string]any{}, "tools_metadata": []any{map[string]any{"name": "list_layers", "status": true, "args": map[string]any{}}, map[string]any{"name": "lock_layer", "status": false, "args": map[string]any{}}}}, ToolMode: true, X: -350, Y: 400},
	}, []Edge{
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
		{From: "Prompt-1", Output: "prompt", To: "Agent-1", Field: "system_prompt"},
		{From: "RemixDocumentation-1", Output: "dataframe_output", To: "FAISS-1", Field: "ingest_data"},
		{From: "EmbeddingModel-1", Output: "embeddings", To: "FAISS-1", Field: "embedding"},
		{From: "FAISS-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "MCPTools-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
	})
}

func pokedexAgent() []byte {
	return Export("Pokédex Agent", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 250, Y: 300},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1000, Y: 200},
		{ID: "APIRequest-1", Type: "APIRequest", Title: "API Request", Fields: map[string]any{"method": "GET", "mode": "URL", "url_input": "", "timeout": 5}, ToolMode: true, X: 100, Y: -350},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 550, Y: -300},
	}, []Edge{
		{From: "APIRequest-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
	})
}

func portfolioWebsiteCodeGenerator() []byte {
	return Export("Portfolio Website Code Generator", []Node{
		{ID: "TextInput-1", Type: "TextInput", Title: "Text Input", Fields: map[string]any{"input_value": "Text typed into Text Input."}, X: 1750, Y: 1000},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2800, Y: 600},
		{ID: "parser-1", Type: "parser", Title: "Parser", Fields: map[string]any{"mode": "Stringify", "pattern": "text={text}", "sep": "\n"}, X: 1750, Y: 400},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-5", "provider": "OpenAI"}}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 2150, Y: 450},
		{ID: "StructuredOutput-1", Type: "StructuredOutput", Title: "Structured Output", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-5", "provider": "OpenAI"}}, "system_prompt": "Extract the fields.", "output_schema": []any{map[string]any{"name": "full_name", "type": "str", "description": "The full_name.", "multiple": "False"}, map[string]any{"name": "email", "type": "str", "description": "The email.", "multiple": "False"}, map[string]any{"name": "phone_number", "type": "str", "description": "The phone_number.", "multiple": "False"}, map[string]any{"name": "linkedin", "type": "str", "description": "The linkedin.", "multiple": "False"}, map[string]any{"name": "github", "type": "str", "description": "The github.", "multiple": "False"}, map[string]any{"name": "portfolio", "type": "str", "description": "The portfolio.", "multiple": "False"}, map[string]any{"name": "visa_status", "type": "str", "description": "The visa_status.", "multiple": "False"}, map[string]any{"name": "summary", "type": "str", "description": "The summary.", "multiple": "False"}, map[string]any{"name": "experience", "type": "dict", "description": "The experience.", "multiple": "False"}, map[string]any{"name": "education", "type": "dict", "description": "The education.", "multiple": "False"}, map[string]any{"name": "skills", "type": "str", "description": "The skills.", "multiple": "False"}, map[string]any{"name": "projects", "type": "str", "description": "The projects.", "multiple": "False"}}}, X: 1300, Y: 650},
		{ID: "File-1", Type: "File", Title: "Read File", Fields: map[string]any{"path": []any{}, "separator": "\n\n"}, X: 950, Y: 650},
	}, []Edge{
		{From: "parser-1", Output: "parsed_text", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "TextInput-1", Output: "text", To: "LanguageModelComponent-1", Field: "system_message"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
		{From: "StructuredOutput-1", Output: "dataframe_output", To: "parser-1", Field: "input_data"},
		{From: "File-1", Output: "message", To: "StructuredOutput-1", Field: "input_value"},
	})
}

func priceDealFinder() []byte {
	return Export("Price Deal Finder", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 50, Y: 700},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1250, Y: 300},
		{ID: "TavilySearchComponent-1", Type: "TavilySearchComponent", Title: "Tavily AI Search", Fields: map[string]any{"api_key": "TAVILY_API_KEY", "max_results": 3}, LoadFromDB: map[string]bool{"api_key": true}, ToolMode: true, X: 50, Y: 200},
		{ID: "AgentQL-1", Type: "AgentQL", Title: "Extract Web Data", Fields: map[string]any{"api_key": "AGENTQL_API_KEY"}, LoadFromDB: map[string]bool{"api_key": true}, ToolMode: true, X: 400, Y: 100},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 800, Y: 100},
	}, []Edge{
		{From: "AgentQL-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "TavilySearchComponent-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
	})
}

func researchAgent() []byte {
	return Export("Research Agent", []Node{
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nPrevious response: {previous_response}", "previous_response": ""}, X: 1800, Y: 850},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 700, Y: 800},
		{ID: "Prompt-2", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nSearch results: {search_results}\nInput value: {input_value}", "search_results": "", "input_value": ""}, X: 2500, Y: 450},
		{ID: "Prompt-3", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: 1100, Y: 550},
		{ID: "Prompt-4", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: 2500, Y: 900},
		{ID: "TavilySearchComponent-1", Type: "TavilySearchComponent", Title: "Tavily AI Search", Fields: map[string]any{"api_key": "TAVILY_API_KEY", "max_results": 3}, LoadFromDB: map[string]bool{"api_key": true}, ToolMode: true, X: 1800, Y: 350},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 3350, Y: 900},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 1450, Y: 600},
		{ID: "LanguageModelComponent-2", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 2900, Y: 550},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 2150, Y: 400},
	}, []Edge{
		{From: "ChatInput-1", Output: "message", To: "Prompt-2", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "Prompt-1", Field: "previous_response"},
		{From: "Prompt-3", Output: "prompt", To: "LanguageModelComponent-1", Field: "system_message"},
		{From: "ChatInput-1", Output: "message", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "Prompt-4", Output: "prompt", To: "LanguageModelComponent-2", Field: "system_message"},
		{From: "Prompt-2", Output: "prompt", To: "LanguageModelComponent-2", Field: "input_value"},
		{From: "LanguageModelComponent-2", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
		{From: "Prompt-1", Output: "prompt", To: "Agent-1", Field: "input_value"},
		{From: "TavilySearchComponent-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "Agent-1", Output: "response", To: "Prompt-2", Field: "search_results"},
	})
}

func researchTranslationLoop() []byte {
	return Export("Research Translation Loop", []Node{
		{ID: "ArXivComponent-1", Type: "ArXivComponent", Title: "arXiv", X: 100, Y: 0},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1150, Y: 400},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: -350, Y: 100},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-5.1", "provider": "OpenAI"}}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 1650, Y: 100},
		{ID: "LoopComponent-1", Type: "LoopComponent", Title: "Loop", Fields: map[string]any{"data": nil}, X: 600, Y: 100},
		{ID: "ParserComponent-1", Type: "ParserComponent", Title: "Parser", Fields: map[string]any{"mode": "Parser", "pattern": "text={text}", "sep": "\n"}, X: 1100, Y: -100},
	}, []Edge{
		{From: "ChatInput-1", Output: "message", To: "ArXivComponent-1", Field: "search_query"},
		{From: "LoopComponent-1", Output: "item", To: "ParserComponent-1", Field: "input_data"},
		{From: "ParserComponent-1", Output: "parsed_text", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "LoopComponent-1", Field: ""},
		{From: "ArXivComponent-1", Output: "dataframe", To: "LoopComponent-1", Field: "data"},
		{From: "LoopComponent-1", Output: "done", To: "ChatOutput-1", Field: "input_value"},
	})
}

func seoKeywordGenerator() []byte {
	return Export("SEO Keyword Generator", []Node{
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nProduct: {product}\nPain points: {pain_points}\nGoals: {goals}\nCurrent solutions: {current_solutions}\nTarget audience: {target_audience}\nExpertise level: {expertise_level}", "product": "Typed-in product.", "pain_points": "Typed-in pain points.", "goals": "Typed-in goals.", "current_solutions": "Typed-in current solutions.", "target_audience": "Typed-in target audience.", "expertise_level": "Typed-in expertise level."}, X: 800, Y: 100},
		{ID: "Prompt-2", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: 800, Y: 1000},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1600, Y: 600},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 1200, Y: 400},
	}, []Edge{
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
		{From: "Prompt-2", Output: "prompt", To: "LanguageModelComponent-1", Field: "system_message"},
	})
}

func saasPricing() []byte {
	return Export("SaaS Pricing", []Node{
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nMonthly infrastructure costs: {monthly_infrastructure_costs}\nCustomer support cost: {customer_support_cost}\nContinuous development cost: {continuous_development_cost}\nDesired profit margin: {desired_profit_margin}\nEstimated subscribers: {estimated_subscribers}", "monthly_infrastructure_costs": "Typed-in monthly infrastructure costs.", "customer_support_cost": "Typed-in customer support cost.", "continuous_development_cost": "Typed-in continuous development cost.", "desired_profit_margin": "Typed-in desired profit margin.", "estimated_subscribers": "Typed-in estimated subscribers."}, X: 1350, Y: 350},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2250, Y: 350},
		{ID: "CalculatorComponent-1", Type: "CalculatorComponent", Title: "Calculator", Fields: map[string]any{"expression": ""}, ToolMode: true, X: 1350, Y: -50},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 1800, Y: 200},
	}, []Edge{
		{From: "Prompt-1", Output: "prompt", To: "Agent-1", Field: "input_value"},
		{From: "CalculatorComponent-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
	})
}

func searchAgent() []byte {
	return Export("Search agent", []Node{
		{ID: "ScrapeGraphSearchApi-1", Type: "ScrapeGraphSearchApi", Title: "ScrapeGraphSearchApi", Fields: map[string]any{"api_key": "SCRAPEGRAPH_API_KEY"}, LoadFromDB: map[string]bool{"api_key": true}, ToolMode: true, X: 50, Y: 150},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 50, Y: 700},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 800, Y: 750},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 400, Y: 150},
	}, []Edge{
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
		{From: "ScrapeGraphSearchApi-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
	})
}

func sequentialTasksAgents() []byte {
	return Export("Sequential Tasks Agents", []Node{
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 50, Y: -1350},
		{ID: "Agent-2", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 800, Y: -1350},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: -1150, Y: -1100},
		{ID: "Prompt-2", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: -350, Y: -1300},
		{ID: "Prompt-3", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nResearch agent output: {research_agent_output}\nFinance agent output: {finance_agent_output}", "research_agent_output": "", "finance_agent_output": ""}, X: 400, Y: -1100},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: -1500, Y: -950},
		{ID: "Agent-3", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: -700, Y: -1350},
		{ID: "YfinanceComponent-1", Type: "YfinanceComponent", Title: "Yahoo! Finance", ToolMode: true, X: -350, Y: -950},
		{ID: "CalculatorComponent-1", Type: "CalculatorComponent", Title: "Calculator", Fields: map[string]any{"expression": ""}, ToolMode: true, X: 400, Y: -500},
		{ID: "TavilySearchComponent-1", Type: "TavilySearchComponent", Title: "Tavily AI Search", Fields: map[string]any{"api_key": "OPENAI_API_KEY", "max_results": 3}, LoadFromDB: map[string]bool{"api_key": true}, ToolMode: true, X: -1150, Y: -550},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1250, Y: -800},
	}, []Edge{
		{From: "Prompt-3", Output: "prompt", To: "Agent-2", Field: "system_prompt"},
		{From: "Prompt-2", Output: "prompt", To: "Agent-1", Field: "system_prompt"},
		{From: "Agent-1", Output: "response", To: "Prompt-3", Field: "finance_agent_output"},
		{From: "ChatInput-1", Output: "message", To: "Agent-3", Field: "input_value"},
		{From: "Prompt-1", Output: "prompt", To: "Agent-3", Field: "system_prompt"},
		{From: "Agent-3", Output: "response", To: "Agent-1", Field: "input_value"},
		{From: "Agent-3", Output: "response", To: "Prompt-3", Field: "research_agent_output"},
		{From: "CalculatorComponent-1", Output: "component_as_tool", To: "Agent-2", Field: "tools"},
		{From: "YfinanceComponent-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "TavilySearchComponent-1", Output: "component_as_tool", To: "Agent-3", Field: "tools"},
		{From: "Agent-2", Output: "response", To: "ChatOutput-1", Field: "input_value"},
	})
}

func simpleAgent() []byte {
	return Export("Simple Agent", []Node{
		{ID: "CalculatorComponent-1", Type: "CalculatorComponent", Title: "Calculator", Fields: map[string]any{"expression": ""}, ToolMode: true, X: 1250, Y: 500},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 1250, Y: 900},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2150, Y: 650},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 1650, Y: 300},
		{ID: "URLComponent-1", Type: "URLComponent", Title: "URL", Fields: map[string]any{"max_depth": 1, "format": "Text", "timeout": 30}, ToolMode: true, X: 1250, Y: -50},
	}, []Edge{
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
		{From: "CalculatorComponent-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "URLComponent-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
	})
}

func socialMediaAgent() []byte {
	return Export("Social Media Agent", []Node{
		{ID: "ApifyActors-1", Type: "ApifyActors", Title: "Apify Actors", X: 300, Y: 50},
		{ID: "ApifyActors-2", Type: "ApifyActors", Title: "Apify Actors", X: 650, Y: 50},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 650, Y: 800},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 1400, Y: 850},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 1000, Y: 300},
	}, []Edge{
		{From: "ApifyActors-2", Output: "tool", To: "Agent-1", Field: "tools"},
		{From: "ApifyActors-1", Output: "tool", To: "Agent-1", Field: "tools"},
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
	})
}

func textSentimentAnalysis() []byte {
	return Export("Text Sentiment Analysis", []Node{
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nSummary: {summary}", "summary": ""}, X: -950, Y: 1100},
		{ID: "Prompt-2", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nText: {text}", "text": ""}, X: -1700, Y: 1000},
		{ID: "Prompt-3", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step."}, X: -1650, Y: 650},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: -750, Y: 550},
		{ID: "ChatOutput-2", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: -150, Y: 1150},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-5", "provider": "OpenAI"}}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: -1300, Y: 1000},
		{ID: "LanguageModelComponent-2", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-5", "provider": "OpenAI"}}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: -600, Y: 1000},
		{ID: "LanguageModelComponent-3", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-5", "provider": "OpenAI"}}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: -1250, Y: 300},
		{ID: "File-1", Type: "File", Title: "Read File", Fields: map[string]any{"path": []any{}, "separator": "\n\n"}, X: -2100, Y: 850},
	}, []Edge{
		{From: "Prompt-2", Output: "prompt", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "Prompt-1", Field: "summary"},
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-2", Field: "input_value"},
		{From: "LanguageModelComponent-2", Output: "text_output", To: "ChatOutput-2", Field: "input_value"},
		{From: "Prompt-3", Output: "prompt", To: "LanguageModelComponent-3", Field: "system_message"},
		{From: "LanguageModelComponent-3", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
		{From: "File-1", Output: "message", To: "Prompt-2", Field: "text"},
		{From: "File-1", Output: "message", To: "LanguageModelComponent-3", Field: "input_value"},
	})
}

func travelPlanningAgents() []byte {
	return Export("Travel Planning Agents", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 1750, Y: 600},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 4350, Y: 600},
		{ID: "URL-1", Type: "URL", Title: "URL", Fields: map[string]any{"max_depth": 1, "format": "Text", "timeout": 30}, ToolMode: true, X: 2800, Y: 950},
		{ID: "CalculatorComponent-1", Type: "CalculatorComponent", Title: "Calculator", Fields: map[string]any{"expression": ""}, ToolMode: true, X: 3550, Y: 1000},
		{ID: "SearchComponent-1", Type: "SearchComponent", Title: "Search API", Fields: map[string]any{"max_results": 3}, ToolMode: true, X: 2100, Y: 900},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 2450, Y: 350},
		{ID: "Agent-2", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 3150, Y: 350},
		{ID: "Agent-3", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 3950, Y: 350},
	}, []Edge{
		{From: "SearchComponent-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "ChatInput-1", Output: "message", To: "Agent-1", Field: "input_value"},
		{From: "Agent-1", Output: "response", To: "Agent-2", Field: "input_value"},
		{From: "Agent-2", Output: "response", To: "Agent-3", Field: "input_value"},
		{From: "Agent-3", Output: "response", To: "ChatOutput-1", Field: "input_value"},
		{From: "URL-1", Output: "component_as_tool", To: "Agent-2", Field: "tools"},
		{From: "CalculatorComponent-1", Output: "component_as_tool", To: "Agent-3", Field: "tools"},
	})
}

func twitterThreadGenerator() []byte {
	return Export("Twitter Thread Generator", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 850, Y: 1050},
		{ID: "TextInput-1", Type: "TextInput", Title: "Content Guidelines", Fields: map[string]any{"input_value": "Text typed into Content Guidelines."}, X: 1300, Y: 400},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2650, Y: 1050},
		{ID: "TextInput-2", Type: "TextInput", Title: "Output Format", Fields: map[string]any{"input_value": "Text typed into Output Format."}, X: 1300, Y: 650},
		{ID: "TextInput-3", Type: "TextInput", Title: "Output Language", Fields: map[string]any{"input_value": "Text typed into Output Language."}, X: 1300, Y: 900},
		{ID: "TextInput-4", Type: "TextInput", Title: "Profile Details", Fields: map[string]any{"input_value": "Text typed into Profile Details."}, X: 1300, Y: 1150},
		{ID: "TextInput-5", Type: "TextInput", Title: "Tone And Style", Fields: map[string]any{"input_value": "Text typed into Tone And Style."}, X: 1300, Y: 1700},
		{ID: "TextInput-6", Type: "TextInput", Title: "Profile Type", Fields: map[string]any{"input_value": "Text typed into Profile Type."}, X: 1300, Y: 1450},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nProfile type: {PROFILE_TYPE}\nProfile details: {PROFILE_DETAILS}\nContent guidelines: {CONTENT_GUIDELINES}\nTone and style: {TONE_AND_STYLE}\nOutput format: {OUTPUT_FORMAT}\nOutput language: {OUTPUT_LANGUAGE}\nLiteral braces: {{PROFILE_TYPE}}\nLiteral braces: {{PROFILE_DETAILS}}\nLiteral braces: {{CONTENT_GUIDELINES}}\nLiteral braces: {{TONE_AND_STYLE}}\nLiteral braces: {{CONTEXT}}\nLiteral braces: {{OUTPUT_FORMAT}}\nLiteral braces: {{OUTPUT_LANGUAGE}}", "PROFILE_TYPE": "", "PROFILE_DETAILS": "", "CONTENT_GUIDELINES": "", "TONE_AND_STYLE": "", "OUTPUT_FORMAT": "", "OUTPUT_LANGUAGE": ""}, X: 1700, Y: 700},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 2200, Y: 750},
	}, []Edge{
		{From: "TextInput-1", Output: "text", To: "Prompt-1", Field: "CONTENT_GUIDELINES"},
		{From: "TextInput-2", Output: "text", To: "Prompt-1", Field: "OUTPUT_FORMAT"},
		{From: "TextInput-3", Output: "text", To: "Prompt-1", Field: "OUTPUT_LANGUAGE"},
		{From: "TextInput-4", Output: "text", To: "Prompt-1", Field: "PROFILE_DETAILS"},
		{From: "TextInput-6", Output: "text", To: "Prompt-1", Field: "PROFILE_TYPE"},
		{From: "TextInput-5", Output: "text", To: "Prompt-1", Field: "TONE_AND_STYLE"},
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-1", Field: "system_message"},
		{From: "ChatInput-1", Output: "message", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
	})
}

func vectorStoreRag() []byte {
	return Export("Vector Store RAG", []Node{
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: 850, Y: 400},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nContext: {context}\nQuestion: {question}", "context": "", "question": ""}, X: 2000, Y: 650},
		{ID: "SplitText-1", Type: "SplitText", Title: "Split Text", Fields: map[string]any{"chunk_size": 500, "chunk_overlap": 50, "separator": "\n"}, X: 1700, Y: 1350},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2750, Y: 850},
		{ID: "OpenAIEmbeddings-1", Type: "OpenAIEmbeddings", Title: "OpenAI Embeddings", Fields: map[string]any{"model": "text-embedding-3-small"}, X: 850, Y: 750},
		{ID: "OpenAIEmbeddings-2", Type: "OpenAIEmbeddings", Title: "OpenAI Embeddings", Fields: map[string]any{"model": "text-embedding-3-small"}, X: 1700, Y: 1850},
		{ID: "parser-1", Type: "parser", Title: "Parser", Fields: map[string]any{"mode": "Parser", "pattern": "text={text}", "sep": "\n"}, X: 1600, Y: 650},
		{ID: "LanguageModelComponent-1", Type: "LanguageModelComponent", Title: "Language Model", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-5", "provider": "OpenAI"}}, "temperature": 0.2, "stream": false, "input_value": "", "system_message": ""}, X: 2350, Y: 650},
		{ID: "AstraDB-1", Type: "AstraDB", Title: "Astra DB", Fields: map[string]any{"collection_name": "", "number_of_results": 3, "search_method": "Vector Search", "search_score_threshold": 0, "token": "ASTRA_DB_APPLICATION_TOKEN"}, LoadFromDB: map[string]bool{"token": true}, X: 2100, Y: 1500},
		{ID: "AstraDB-2", Type: "AstraDB", Title: "Astra DB", Fields: map[string]any{"collection_name": "", "number_of_results": 3, "search_method": "Vector Search", "search_score_threshold": 0, "token": "ASTRA_DB_APPLICATION_TOKEN"}, LoadFromDB: map[string]bool{"token": true}, X: 1200, Y: 500},
		{ID: "File-1", Type: "File", Title: "Read File", Fields: map[string]any{"path": []any{}, "separator": "\n\n"}, X: 1300, Y: 1500},
	}, []Edge{
		{From: "ChatInput-1", Output: "message", To: "Prompt-1", Field: "question"},
		{From: "parser-1", Output: "parsed_text", To: "Prompt-1", Field: "context"},
		{From: "Prompt-1", Output: "prompt", To: "LanguageModelComponent-1", Field: "input_value"},
		{From: "LanguageModelComponent-1", Output: "text_output", To: "ChatOutput-1", Field: "input_value"},
		{From: "SplitText-1", Output: "dataframe", To: "AstraDB-1", Field: "ingest_data"},
		{From: "ChatInput-1", Output: "message", To: "AstraDB-2", Field: "search_query"},
		{From: "AstraDB-2", Output: "dataframe", To: "parser-1", Field: "input_data"},
		{From: "OpenAIEmbeddings-2", Output: "embeddings", To: "AstraDB-1", Field: "embedding_model"},
		{From: "OpenAIEmbeddings-1", Output: "embeddings", To: "AstraDB-2", Field: "embedding_model"},
		{From: "File-1", Output: "message", To: "SplitText-1", Field: "data_inputs"},
	})
}

func youtubeAnalysis() []byte {
	return Export("Youtube Analysis", []Node{
		{ID: "YouTubeCommentsComponent-1", Type: "YouTubeCommentsComponent", Title: "YouTube Comments", X: 200, Y: 6050},
		{ID: "Agent-1", Type: "Agent", Title: "Agent", Fields: map[string]any{"model": []any{map[string]any{"name": "claude-opus-4-5-20251101", "provider": "Anthropic"}}, "system_prompt": "You are a helpful assistant with tools.", "input_value": "", "max_iterations": 15, "add_current_date_tool": true, "n_messages": 100}, X: 2000, Y: 6250},
		{ID: "Prompt-1", Type: "Prompt", Title: "Prompt", Fields: map[string]any{"template": "Instructions for the step.\nUrl: {url}\nAnalysis: {analysis}", "url": "", "analysis": ""}, X: 1600, Y: 6450},
		{ID: "ChatOutput-1", Type: "ChatOutput", Title: "Chat Output", Fields: map[string]any{"input_value": "", "should_store_message": true}, X: 2350, Y: 6650},
		{ID: "YouTubeTranscripts-1", Type: "YouTubeTranscripts", Title: "YouTube Transcripts", ToolMode: true, X: 1600, Y: 6000},
		{ID: "parser-1", Type: "parser", Title: "Parser", Fields: map[string]any{"mode": "Parser", "pattern": "model_response={model_response}", "sep": "\n"}, X: 1050, Y: 5950},
		{ID: "ChatInput-1", Type: "ChatInput", Title: "Chat Input", Fields: map[string]any{"input_value": "A question for the flow.", "should_store_message": true}, X: -450, Y: 6350},
		{ID: "BatchRunComponent-1", Type: "BatchRunComponent", Title: "Batch Run", Fields: map[string]any{"model": []any{map[string]any{"name": "gpt-5", "provider": "OpenAI"}}, "system_message": "Classify the row.", "output_column_name": "model_response"}, X: 600, Y: 5900},
	}, []Edge{
		{From: "Prompt-1", Output: "prompt", To: "Agent-1", Field: "input_value"},
		{From: "Agent-1", Output: "response", To: "ChatOutput-1", Field: "input_value"},
		{From: "YouTubeTranscripts-1", Output: "component_as_tool", To: "Agent-1", Field: "tools"},
		{From: "parser-1", Output: "parsed_text", To: "Prompt-1", Field: "analysis"},
		{From: "ChatInput-1", Output: "message", To: "YouTubeCommentsComponent-1", Field: "video_url"},
		{From: "ChatInput-1", Output: "message", To: "Prompt-1", Field: "url"},
		{From: "YouTubeCommentsComponent-1", Output: "comments", To: "BatchRunComponent-1", Field: "df"},
	})
}
