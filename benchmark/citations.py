"""The five papers CultureLens implements, by title, authors and arXiv id."""

CRT = ("De Rosa Palmini & Cetinic, \"The Persistence of Cultural Memory: Investigating Multimodal Iconicity "
       "in Diffusion Models\", arXiv:2511.11435")
CUBE = ("Kannen, Ahmad, Andreetto, Prabhakaran, Prabhu, Dieng, Bhattacharyya & Dave, \"Beyond Aesthetics: "
        "Cultural Competence in Text-to-Image Models\", NeurIPS 2024 D&B, arXiv:2407.06863")
W1KP = ("Tang, Zhang, Xu, Lu, Li, Stenetorp, Lin & Ture, \"Words Worth a Thousand Pictures: Measuring and "
        "Understanding Perceptual Variability in Text-to-Image Generation\", arXiv:2406.08482")
CAIRE = ("Yayavaram, Yayavaram, Khanuja, Saxon & Neubig, \"CAIRE: Cultural Attribution of Images with "
         "Retrieval\", EACL 2026, arXiv:2506.09109")
CULTURALFRAMES = ("Nayak, Bhatia, Zhang, Rieser, Hendricks, van Steenkiste, Goyal, Stańczak & Agrawal, "
                  "\"CulturalFrames: Assessing Cultural Expectation Alignment in Text-to-Image Models and "
                  "Evaluation Metrics\", arXiv:2506.08835")

ALL = {"iconicity": CRT, "awareness": CUBE, "diversity": CUBE, "variability": W1KP, "relevance": CAIRE,
       "expectations": CULTURALFRAMES}

# Short forms for table cells; the full references above go in cards, the About page and the README.
SHORT = {
    CRT: "De Rosa Palmini & Cetinic, arXiv:2511.11435",
    CUBE: "Kannen et al., arXiv:2407.06863",
    W1KP: "Tang et al., arXiv:2406.08482",
    CAIRE: "Yayavaram et al., arXiv:2506.09109",
    CULTURALFRAMES: "Nayak et al., arXiv:2506.08835",
}
